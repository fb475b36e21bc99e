// Moving between the panel's pages without reloading it: the address changes, and the panel
// (App.svelte, which listens to popstate) shows the page it names; back and forward work.
import { panelBase } from './api'

/** navigate opens the panel's page at path (e.g. "apps/@team/web") for a plain click on a link,
 * and leaves other clicks (a new tab, a new window) to the browser. */
export function navigate(event: MouseEvent, path: string) {
  if (event.metaKey || event.ctrlKey || event.shiftKey || event.button !== 0) return
  event.preventDefault()
  history.pushState(null, '', panelBase + '/' + path)
  dispatchEvent(new PopStateEvent('popstate'))
}

/** appPath is the panel's path of an app's page. */
export const appPath = (name: string) => 'apps/' + name
