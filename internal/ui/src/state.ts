// An app's state in words that match the truth: what answers its unpinned requests, and how
// well. The runtime's worker record names it in state (serving, failing, crash-looping,
// disabled, not-started); a runtime from before that field is read from what it does give: the
// failed checks, the pool's crash-looping entries and the enabled versions. A failing or
// crash-looping app is never given the colour of a healthy one.
import type { PoolProcess, Worker } from './types'

export type AppState = 'serving' | 'failing' | 'crash-looping' | 'disabled' | 'not-started'

/** The words and the badge tone of each state. */
export const stateWords: Record<AppState, { words: string; tone: 'good' | 'bad' | 'caution' | 'neutral' }> = {
  serving: { words: 'serving', tone: 'good' },
  failing: { words: 'failing its check', tone: 'bad' },
  'crash-looping': { words: 'crash-looping', tone: 'bad' },
  disabled: { words: 'disabled', tone: 'neutral' },
  'not-started': { words: 'not started', tone: 'neutral' },
}

const known = new Set(Object.keys(stateWords))

/** appState is the state of w, given the pool's processes (of every worker, or of w only). A
 * version both failing its check and crash-looping (a process that exits at each start) is
 * crash-looping, the more telling of the two, whichever the record names. */
export function appState(w: Worker, procs: PoolProcess[]): AppState {
  const served = w.served ?? w.activeVersion
  const mine = procs.filter((p) => p.worker === w.name && p.version === served)
  if (served && mine.some((p) => p.state === 'crash-looping')) return 'crash-looping'
  const given = (w as { state?: string }).state
  if (given && known.has(given)) return given as AppState
  if (!served || w.versions.length === 0 || w.disabledVersions.length >= w.versions.length) return 'disabled'
  if (w.failedVersions.some((f) => f.version === served)) return 'failing'
  if (w.kinds[served] === 'process' && !mine.some((p) => p.state === 'running')) return 'not-started'
  return 'serving'
}

/** kindWords names how a version is served, for people. */
export function kindWords(kind: string | undefined): string {
  switch (kind) {
    case 'process':
      return 'process'
    case 'wasm':
      return 'WebAssembly'
    case 'spa':
      return 'single-page app'
    case 'static':
      return 'static files'
    default:
      return '—'
  }
}
