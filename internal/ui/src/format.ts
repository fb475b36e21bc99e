/** formatSize writes a byte count for people: 512 B, 1.5 KiB, 12.0 MiB, 1.2 GiB. */
export function formatSize(n: number): string {
  if (n < 1024) return n + ' B'
  if (n < 1 << 20) return (n / 1024).toFixed(1) + ' KiB'
  if (n < 1 << 30) return (n / (1 << 20)).toFixed(1) + ' MiB'
  return (n / (1 << 30)).toFixed(1) + ' GiB'
}
