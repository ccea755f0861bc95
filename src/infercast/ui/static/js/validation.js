export async function mount(main) { main.textContent = "validation: coming"; }
