// trapFocus keeps Tab and Shift+Tab inside node, a modal dialog: past its last control the
// focus wraps to the first, and back from the first to the last. (A modal <dialog> makes the
// page behind it inert, but Tab would still leave it for the browser's own controls.)
export function trapFocus(node: HTMLElement) {
  const selector =
    'a[href], button:not([disabled]), input:not([disabled]), select:not([disabled]), textarea:not([disabled]), [tabindex]:not([tabindex="-1"])'
  function keydown(event: KeyboardEvent) {
    if (event.key !== 'Tab') return
    const controls = [...node.querySelectorAll<HTMLElement>(selector)].filter((el) => el.getClientRects().length > 0)
    if (!controls.length) return
    const first = controls[0]
    const last = controls[controls.length - 1]
    if (event.shiftKey && document.activeElement === first) {
      event.preventDefault()
      last.focus()
    } else if (!event.shiftKey && document.activeElement === last) {
      event.preventDefault()
      first.focus()
    }
  }
  node.addEventListener('keydown', keydown)
  return { destroy: () => node.removeEventListener('keydown', keydown) }
}
