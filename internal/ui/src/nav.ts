// Moving between the panel's pages without reloading it: the address changes, and the panel
// (App.svelte, which listens to popstate) shows the page it names; back and forward work.
import { panelBase } from './api'

/** goTo opens the panel's page at path (e.g. "apps/@team/web", "apps/web#logs"). */
export function goTo(path: string) {
  history.pushState(null, '', panelBase + '/' + path)
  dispatchEvent(new PopStateEvent('popstate'))
}

/** navigate opens the panel's page at path for a plain click on a link, and leaves other
 * clicks (a new tab, a new window) to the browser. */
export function navigate(event: MouseEvent, path: string) {
  if (event.metaKey || event.ctrlKey || event.shiftKey || event.button !== 0) return
  event.preventDefault()
  goTo(path)
}

/** appPath is the panel's path of an app's page. */
export const appPath = (name: string) => 'apps/' + name
