// The panel's colour theme: the system's (prefers-color-scheme) unless the header's toggle
// stored a choice in this browser; the choice is the data-theme attribute of <html>, which the
// stylesheet reads.
export type Theme = 'system' | 'light' | 'dark'

const key = 'runtime-theme'

/** storedTheme is the choice stored in this browser, system when there is none. */
export function storedTheme(): Theme {
  try {
    const t = localStorage.getItem(key)
    return t === 'light' || t === 'dark' ? t : 'system'
  } catch {
    return 'system' // storage refused (a private window's policy): follow the system
  }
}

/** applyTheme shows the panel in theme t and stores the choice. */
export function applyTheme(t: Theme) {
  const root = document.documentElement
  if (t === 'system') root.removeAttribute('data-theme')
  else root.setAttribute('data-theme', t)
  try {
    if (t === 'system') localStorage.removeItem(key)
    else localStorage.setItem(key, t)
  } catch {
    // not stored: the choice lasts as long as the page
  }
}
