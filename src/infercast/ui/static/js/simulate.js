export async function mount(main) { main.textContent = "simulate: coming"; }
