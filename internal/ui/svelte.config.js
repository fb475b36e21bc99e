export default {
  // Defaults: Svelte 5 runes, CSS extracted by Vite.
}
