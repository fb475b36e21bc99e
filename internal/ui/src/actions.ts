// The changes an app's menu, its page and the command palette share: each sends the API
// request and returns what happened in words.
import { api, unitPath } from './api'
import type { Worker } from './types'

/** restartApp restarts the running processes of the app name. */
export async function restartApp(name: string): Promise<string> {
  const r = await api<{ data: { restarted: string[] } }>('POST', `/workers/${unitPath(name)}/restart`)
  return r.data.restarted.length ? `Restarted ${name} ${r.data.restarted.join(', ')}.` : `${name} had no process running.`
}

/** previousVersion is the version a rollback of w serves: the enabled one before the newest
 * enabled; undefined when w has fewer than two enabled versions. */
export function previousVersion(w: Worker): { newest: string; previous: string } | undefined {
  const enabled = w.versions.filter((v) => !w.disabledVersions.includes(v))
  if (enabled.length < 2) return undefined
  return { newest: enabled[enabled.length - 1], previous: enabled[enabled.length - 2] }
}

/** rollbackApp disables the newest enabled version of w, as runtime rollback does, so that the
 * version before it serves. */
export async function rollbackApp(w: Worker): Promise<string> {
  const r = previousVersion(w)
  if (!r) throw new Error(`${w.name} has no previous enabled version to roll back to`)
  await api('POST', `/workers/${unitPath(w.name)}/${r.newest}/disable`)
  return `Disabled ${w.name} ${r.newest}: ${r.previous} is served now.`
}

/** setVersion enables or disables one version of the app name. */
export async function setVersion(name: string, version: string, enable: boolean): Promise<void> {
  await api('POST', `/workers/${unitPath(name)}/${version}/${enable ? 'enable' : 'disable'}`)
}
