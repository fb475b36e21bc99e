// The panel's view of the runtime: where it is mounted, where the API is, and requests to it
// with the session cookie. Every failure is an ApiError carrying the server's code, message
// and request id.

import type { Discovery, Principal } from './types'

/** allowed reports whether p holds perm: the runtime enforces permissions, the panel only
 * leaves out what p may not do. */
export const allowed = (p: Principal, perm: string) => p.isRoot || p.permissions.includes(perm)

/** Expired returns to sign-in when err says the session is gone, and says whether it did. */
export type Expired = (err: unknown) => boolean

/** The panel's own base, e.g. "/cpanel" or "/hp/cpanel": the runtime names it in <base href>. */
export const panelBase = new URL(document.baseURI).pathname.replace(/\/$/, '')

/** The path the runtime is mounted under, e.g. "" or "/hp". */
export const mountPath = panelBase.slice(0, -'/cpanel'.length)

export class ApiError extends Error {
  status: number
  code: string
  requestId: string

  constructor(status: number, code: string, message: string, requestId: string) {
    super(message)
    this.status = status
    this.code = code
    this.requestId = requestId
  }
}

let discovery: Promise<Discovery> | undefined

/** discover reads /.well-known/runtime once: the API path and the version. */
export async function discover(): Promise<Discovery> {
  if (!discovery) {
    discovery = send<Discovery>('GET', mountPath + '/.well-known/runtime').catch((err: unknown) => {
      discovery = undefined
      throw err
    })
  }
  return discovery
}

/** api sends a request to an API path such as "/admin/session". */
// The answers are the API's JSON, typed by the caller; T defaults to any because each section
// reads only the fields it shows.
export async function api<T = any>(method: string, path: string, body?: unknown): Promise<T> {
  const { api: prefix } = await discover()
  return send<T>(method, prefix + path, body)
}

async function send<T>(method: string, url: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = { Accept: 'application/json' }
  const init: RequestInit = { method, credentials: 'same-origin', headers }
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json'
    init.body = JSON.stringify(body)
  }
  let resp: Response
  try {
    resp = await fetch(url, init)
  } catch (err) {
    throw new ApiError(0, 'NETWORK', 'the runtime did not answer: ' + (err instanceof Error ? err.message : String(err)), '')
  }
  const requestId = resp.headers.get('X-Request-Id') || ''
  const text = await resp.text()
  let data: any = null
  if (text) {
    try {
      data = JSON.parse(text)
    } catch {
      data = null
    }
  }
  if (!resp.ok) {
    const e = data && data.error
    throw new ApiError(resp.status, e ? e.code : 'HTTP_' + resp.status, e ? e.message : resp.statusText, requestId)
  }
  return data as T
}

/** upload sends body, a FormData, to an API path, reporting the share of the bytes sent
 * through onprogress (0 to 1); it resolves with the answer as api does. */
export async function upload<T = any>(path: string, body: FormData, onprogress: (share: number) => void): Promise<T> {
  const { api: prefix } = await discover()
  return new Promise<T>((resolve, reject) => {
    const xhr = new XMLHttpRequest()
    xhr.open('POST', prefix + path)
    xhr.withCredentials = true
    xhr.setRequestHeader('Accept', 'application/json')
    xhr.upload.onprogress = (e) => e.lengthComputable && onprogress(e.loaded / e.total)
    xhr.onload = () => {
      let data: any = null
      try {
        data = JSON.parse(xhr.responseText)
      } catch {
        data = null
      }
      if (xhr.status >= 200 && xhr.status < 300) {
        onprogress(1)
        resolve(data as T)
        return
      }
      const e = data && data.error
      reject(new ApiError(xhr.status, e ? e.code : 'HTTP_' + xhr.status, e ? e.message : xhr.statusText,
        xhr.getResponseHeader('X-Request-Id') || ''))
    }
    xhr.onerror = () => reject(new ApiError(0, 'NETWORK', 'the upload did not reach the runtime', ''))
    xhr.send(body)
  })
}

/** unitPath is the API path segment of a worker: "_/name" or "@scope/name". */
export function unitPath(name: string): string {
  return name.startsWith('@') ? name : '_/' + name
}

/** attempt returns a runner for a page's changes: it runs a change, then reload, and hands a
 * failure to fail unless onexpired took it (the session ended). */
export function attempt(onexpired: Expired, fail: (err: unknown) => void, reload?: () => Promise<void>) {
  return async (change: () => Promise<unknown>) => {
    try {
      await change()
      if (reload) await reload()
    } catch (err) {
      if (!onexpired(err)) fail(err)
    }
  }
}
