import { defineConfig } from 'vite'
import { svelte } from '@sveltejs/vite-plugin-svelte'

// The bundle goes to ../dist, which the Go package embeds. Asset URLs are relative: the
// runtime serves index.html with a <base href> naming where the panel is mounted.
export default defineConfig({
  plugins: [svelte()],
  base: './',
  build: {
    outDir: '../dist',
    emptyOutDir: true,
    assetsDir: 'assets',
    sourcemap: false,
    modulePreload: { polyfill: false },
  },
})
