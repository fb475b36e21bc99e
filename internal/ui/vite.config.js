import { defineConfig } from 'vite'
import { svelte } from '@sveltejs/vite-plugin-svelte'
import tailwindcss from '@tailwindcss/vite'

// The control panel, into dist/cpanel, which package ui embeds. Asset URLs are relative: the
// runtime serves index.html with a <base href> naming where the panel is mounted, and the
// assets, whose names carry a hash of their content, under assets/.
export default defineConfig({
  plugins: [tailwindcss(), svelte()],
  base: './',
  build: {
    outDir: 'dist/cpanel',
    emptyOutDir: true,
    assetsDir: 'assets',
    sourcemap: false,
    modulePreload: { polyfill: false },
    // The icon stays a file under assets/ (a page's own asset, like the others), not a data:
    // URL inlined into index.html.
    assetsInlineLimit: (file) => (file.endsWith('.svg') ? false : undefined),
  },
})
