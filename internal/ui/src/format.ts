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

/** describeAgent names the browser and system of a User-Agent string for people: "Chrome on
 * macOS", "Firefox on Linux", "Safari on iOS", "curl"; "an unknown browser" when there is
 * none. It knows the common browsers and tools; anything else is named by its first product. */
export function describeAgent(ua: string | undefined): string {
  ua = (ua ?? '').trim()
  if (!ua) return 'an unknown browser'
  const has = (re: RegExp) => re.test(ua!)
  const tools: [RegExp, string][] = [
    [/^curl\//i, 'curl'],
    [/^Wget\//i, 'Wget'],
    [/^Go-http-client\//, 'a Go program'],
    [/^python-requests\/|^Python-urllib\//i, 'a Python program'],
    [/^node-fetch|^undici|^axios\//i, 'a Node.js program'],
    [/^HTTPie\//i, 'HTTPie'],
    [/^PostmanRuntime\//i, 'Postman'],
  ]
  for (const [re, name] of tools) if (re.test(ua)) return name
  let browser = ''
  if (has(/\bEdg(e|A|iOS)?\//)) browser = 'Edge'
  else if (has(/\bOPR\/|\bOpera\b/)) browser = 'Opera'
  else if (has(/\bSamsungBrowser\//)) browser = 'Samsung Internet'
  else if (has(/\bFirefox\/|\bFxiOS\//)) browser = 'Firefox'
  else if (has(/\bHeadlessChrome\//)) browser = 'Headless Chrome'
  else if (has(/\bChrom(e|ium)\/|\bCriOS\//)) browser = 'Chrome'
  else if (has(/\bVersion\/[\d.]+.*\bSafari\//)) browser = 'Safari'
  let os = ''
  if (has(/\bWindows\b/)) os = 'Windows'
  else if (has(/\b(iPhone|iPad|iPod)\b/)) os = 'iOS'
  else if (has(/\bAndroid\b/)) os = 'Android'
  else if (has(/\bCrOS\b/)) os = 'ChromeOS'
  else if (has(/\bMac OS X\b|\bMacintosh\b/)) os = 'macOS'
  else if (has(/\bLinux\b|\bX11\b/)) os = 'Linux'
  if (!browser) {
    // Not a browser it knows: the first product token, e.g. "MyTool/1.2 (…)" is MyTool.
    const product = ua.split(/[\/\s]/)[0].slice(0, 40)
    browser = product && product !== 'Mozilla' ? product : 'an unknown browser'
  }
  return os ? `${browser} on ${os}` : browser
}

/** nameParts cuts a name where it may wrap: after each separator (/ - . _ @), so that a long
 * name wraps between its words ("@team/" "a-" "long-" "name") rather than inside one. */
export function nameParts(name: string): string[] {
  return name.split(/(?<=[/\-._@])/)
}
