/** formatSize writes a byte count for people: 512 B, 1.5 KiB, 12.0 MiB, 1.2 GiB. */
export function formatSize(n: number): string {
  if (n < 1024) return n + ' B'
  if (n < 1 << 20) return (n / 1024).toFixed(1) + ' KiB'
  if (n < 1 << 30) return (n / (1 << 20)).toFixed(1) + ' MiB'
  return (n / (1 << 30)).toFixed(1) + ' GiB'
}

/** formatAgo writes how long before now (milliseconds) the RFC 3339 time iso was: just now,
 * 40 s ago, 3 min ago, 2 h ago, 5 d ago; "—" for a time it cannot read. */
export function formatAgo(iso: string, now: number): string {
  const t = Date.parse(iso)
  if (Number.isNaN(t)) return '—'
  const s = Math.max(0, Math.round((now - t) / 1000))
  if (s < 5) return 'just now'
  if (s < 60) return s + ' s ago'
  if (s < 3600) return Math.floor(s / 60) + ' min ago'
  if (s < 86400) return Math.floor(s / 3600) + ' h ago'
  return Math.floor(s / 86400) + ' d ago'
}
