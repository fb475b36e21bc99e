// The panel's view of the runtime: where it is mounted, where the API is, and requests to it
// with the session cookie. Every failure is an ApiError carrying the server's code, message
// and request id.

/** The panel's own base, e.g. "/cpanel" or "/hp/cpanel": the runtime names it in <base href>. */
export const panelBase = new URL(document.baseURI).pathname.replace(/\/$/, '')

/** The path the runtime is mounted under, e.g. "" or "/hp". */
export const mountPath = panelBase.slice(0, -'/cpanel'.length)

export class ApiError extends Error {
  constructor(status, code, message, requestId) {
    super(message)
    this.status = status
    this.code = code
    this.requestId = requestId
  }
}

let discovery

/** discover reads /.well-known/runtime once: the API path and the version. */
export async function discover() {
  if (!discovery) {
    discovery = send('GET', mountPath + '/.well-known/runtime').catch((err) => {
      discovery = undefined
      throw err
    })
  }
  return discovery
}

/** api sends a request to an API path such as "/admin/session". */
export async function api(method, path, body) {
  const { api: prefix } = await discover()
  return send(method, prefix + path, body)
}

async function send(method, url, body) {
  const init = { method, credentials: 'same-origin', headers: { Accept: 'application/json' } }
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json'
    init.body = JSON.stringify(body)
  }
  let resp
  try {
    resp = await fetch(url, init)
  } catch (err) {
    throw new ApiError(0, 'NETWORK', 'the runtime did not answer: ' + err.message, '')
  }
  const requestId = resp.headers.get('X-Request-Id') || ''
  const text = await resp.text()
  let data = null
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
  return data
}

/** upload sends body, a FormData, to an API path, reporting the share of the bytes sent
 * through onprogress (0 to 1); it resolves with the answer as api does. */
export async function upload(path, body, onprogress) {
  const { api: prefix } = await discover()
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest()
    xhr.open('POST', prefix + path)
    xhr.withCredentials = true
    xhr.setRequestHeader('Accept', 'application/json')
    xhr.upload.onprogress = (e) => e.lengthComputable && onprogress(e.loaded / e.total)
    xhr.onload = () => {
      let data = null
      try {
        data = JSON.parse(xhr.responseText)
      } catch {
        data = null
      }
      if (xhr.status >= 200 && xhr.status < 300) {
        onprogress(1)
        resolve(data)
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
export function unitPath(name) {
  return name.startsWith('@') ? name : '_/' + name
}

/** attempt returns a runner for a page's changes: it runs a change, then reload, and hands a
 * failure to fail unless onexpired took it (the session ended). */
export function attempt(onexpired, fail, reload) {
  return async (change) => {
    try {
      await change()
      if (reload) await reload()
    } catch (err) {
      if (!onexpired(err)) fail(err)
    }
  }
}
