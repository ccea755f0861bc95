export async function mount(main) { main.textContent = "plan: coming"; }
