import { defineConfig } from 'vite'

// The API reference's script and stylesheet, into dist/docs/assets, which package ui embeds
// beside the page template docs/page.html. Their names carry a hash of their content, as the
// panel's do; the runtime serves them under <api>/docs/.
export default defineConfig({
  base: './',
  build: {
    outDir: 'dist/docs',
    emptyOutDir: true,
    sourcemap: false,
    modulePreload: { polyfill: false },
    chunkSizeWarningLimit: 4096,
    rollupOptions: {
      input: 'docs/main.ts',
      output: {
        entryFileNames: 'assets/docs-[hash].js',
        assetFileNames: 'assets/docs-[hash][extname]',
        codeSplitting: false,
      },
    },
  },
})
