import { defineConfig } from 'vite'

// The API reference page's script and stylesheet, with fixed names: the Go package handlers
// embeds ../../handlers/docsui/dist and serves the files under <api>/docs/ with ETags, next to
// its own page template.
export default defineConfig({
  base: './',
  build: {
    outDir: '../../handlers/docsui/dist',
    emptyOutDir: true,
    sourcemap: false,
    modulePreload: { polyfill: false },
    chunkSizeWarningLimit: 4096,
    rollupOptions: {
      input: 'docs/main.ts',
      output: {
        entryFileNames: 'docs.js',
        assetFileNames: 'docs[extname]',
        codeSplitting: false,
      },
    },
  },
})
