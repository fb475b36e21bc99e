// Interactive API reference for an OpenAPI 3.1 document.
//
// Everything taken from the document is inserted with createElement/textContent
// (see h()), never as HTML, so a hostile description cannot inject markup. The
// page runs under a strict CSP: no inline styles or scripts, same-origin fetch.
'use strict';
(() => {
  const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];
  const specUrl = document.body.dataset.spec || 'openapi.json';
  const $ = (id) => document.getElementById(id);
  const apiKey = $('api-key'); // the key lives only in this input, never in storage
  let spec = {};
  let apiBase = '';
  const ops = [];
  const byKey = new Map();
  const groups = [];
  let uidSeq = 0;
  const uid = (p) => `${p}-${++uidSeq}`;

  // h('tag', {attr: value, onclick: fn}, ...children): strings become text nodes.
  function h(tag, attrs, ...kids) {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v == null || v === false) continue;
      if (k === 'class') el.className = v;
      else if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
      else el.setAttribute(k, v === true ? '' : String(v));
    }
    for (const kid of kids.flat(Infinity)) {
      if (kid == null || kid === false || kid === '') continue;
      el.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
    }
    return el;
  }

  // Descriptions are usually light Markdown; render paragraphs and `code` only.
  function prose(text, cls = 'prose') {
    if (!text) return null;
    return h('div', { class: cls }, String(text).trim().split(/\n\s*\n/).map((para) =>
      h('p', null, para.split(/(`[^`\n]+`)/).map((part, i) => (i % 2 ? h('code', null, part.slice(1, -1)) : part)))));
  }

  const badge = (text, cls) => h('span', { class: `badge ${cls || ''}` }, text);
  const methodBadge = (m) => h('span', { class: `method m-${m}` }, m.toUpperCase());
  const json = (v) => JSON.stringify(v, null, 2);

  // ---- $ref handling -------------------------------------------------------

  function pointer(ref) {
    if (typeof ref !== 'string' || !ref.startsWith('#')) return undefined;
    let node = spec;
    for (const raw of ref.slice(1).split('/').slice(1)) {
      let key = raw;
      try { key = decodeURIComponent(raw); } catch { /* keep raw */ }
      node = node == null ? undefined : node[key.replace(/~1/g, '/').replace(/~0/g, '~')];
    }
    return node;
  }

  // Follows a $ref chain; sibling keywords (allowed in 3.1) override the target.
  function resolve(obj) {
    for (let i = 0; obj && typeof obj.$ref === 'string' && i < 32; i++) {
      const { $ref, ...rest } = obj;
      const target = pointer($ref);
      obj = target ? { ...target, ...rest } : { ...rest, 'x-unresolved': $ref };
    }
    return obj || {};
  }

  const refName = (s) => (s && typeof s.$ref === 'string' ? s.$ref.split('/').pop() : null);

  // Resolves a schema and merges allOf parts, so callers see one flat object.
  function flat(schema, seen = new Set()) {
    const s = resolve(schema);
    if (!Array.isArray(s.allOf)) return s;
    const out = { ...s, properties: { ...s.properties }, required: [...(s.required || [])] };
    delete out.allOf;
    for (const part of s.allOf) {
      const name = refName(part);
      if (name && seen.has(name)) continue;
      const p = flat(part, name ? new Set(seen).add(name) : seen);
      Object.assign(out.properties, p.properties);
      out.required.push(...(p.required || []));
      for (const k of ['type', 'description', 'items', 'additionalProperties', 'enum', 'format', 'oneOf', 'anyOf']) {
        if (out[k] === undefined && p[k] !== undefined) out[k] = p[k];
      }
    }
    if (!Object.keys(out.properties).length) delete out.properties;
    return out;
  }

  function typesOf(s) {
    let t = Array.isArray(s.type) ? [...s.type] : s.type ? [s.type] : [];
    if (!t.length) {
      if (s.properties || s.additionalProperties) t = ['object'];
      else if (s.items) t = ['array'];
    }
    if (s.nullable && !t.includes('null')) t.push('null'); // OpenAPI 3.0 style
    return t;
  }

  // Short human label: "string | null", "array<Item>", "Error".
  function typeLabel(schema, depth = 0) {
    const name = refName(schema);
    if (name) return name;
    const s = flat(schema);
    const alts = s.oneOf || s.anyOf;
    if (depth > 4) return '…';
    const t = typesOf(s);
    if (!t.length) {
      if (alts) return alts.map((a) => typeLabel(a, depth + 1)).join(' | ');
      if ('const' in s) return JSON.stringify(s.const);
      if (Array.isArray(s.enum)) return [...new Set(s.enum.map((v) => (v === null ? 'null' : typeof v)))].join(' | ');
      return 'any';
    }
    return t.map((x) => (x === 'array' ? `array<${s.items ? typeLabel(s.items, depth + 1) : 'any'}>` : x)).join(' | ');
  }

  const isBinary = (s) => s.format === 'binary' || (s.contentMediaType && !s.contentEncoding);

  // ---- schema rendering ----------------------------------------------------

  function constraints(s) {
    const bits = [];
    if (Array.isArray(s.enum)) bits.push(['enum', s.enum.map((v) => JSON.stringify(v)).join(', ')]);
    if ('const' in s) bits.push(['const', JSON.stringify(s.const)]);
    if (s.default !== undefined) bits.push(['default', JSON.stringify(s.default)]);
    for (const k of ['minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum', 'minLength', 'maxLength', 'minItems', 'maxItems', 'pattern', 'contentMediaType']) {
      if (s[k] !== undefined) bits.push([k, String(s[k])]);
    }
    if (s.example !== undefined) bits.push(['example', JSON.stringify(s.example)]);
    return bits.length ? h('div', { class: 'constraints' }, bits.map(([k, v]) => h('span', null, `${k} `, h('code', null, v)))) : null;
  }

  // Nested property list. `seen` holds the $ref names on the current path, so a
  // recursive schema is shown once and then referred to instead of looping.
  function schemaTree(schema, seen = new Set(), depth = 0) {
    const name = refName(schema);
    if (name && seen.has(name)) return h('p', { class: 'muted small' }, `↻ ${name} (recursive)`);
    if (name) seen = new Set(seen).add(name);
    if (depth > 10) return h('p', { class: 'muted small' }, '… (nested too deeply)');
    const s = flat(schema, seen);
    if (s.items && !s.properties) return schemaTree(s.items, seen, depth + 1);
    const list = h('ul', { class: 'props' });
    const req = new Set(s.required || []);
    for (const [pn, ps] of Object.entries(s.properties || {})) list.append(propRow(pn, ps, req.has(pn), seen, depth));
    if (s.additionalProperties && typeof s.additionalProperties === 'object') list.append(propRow('{key}', s.additionalProperties, false, seen, depth));
    const alts = s.oneOf || s.anyOf;
    if (alts) alts.forEach((a, i) => list.append(propRow(`${s.oneOf ? 'one of' : 'any of'} #${i + 1}`, a, false, seen, depth)));
    return list.children.length ? list : null;
  }

  function propRow(name, schema, required, seen, depth) {
    const s = flat(schema, seen);
    const li = h('li', null,
      h('div', { class: 'prop-head' },
        h('code', { class: 'pname' }, name),
        h('span', { class: 'ptype' }, typeLabel(schema)),
        s.format && h('span', { class: 'pfmt' }, s.format),
        required && badge('required', 'b-req'),
        s.readOnly && badge('read-only'),
        s.writeOnly && badge('write-only'),
        s.deprecated && badge('deprecated', 'b-warn')),
      prose(s.description, 'pdesc'),
      constraints(s));
    const t = typesOf(s);
    if (refName(schema) || t.includes('object') || t.includes('array') || s.oneOf || s.anyOf) {
      const nested = schemaTree(schema, seen, depth + 1);
      if (nested) li.append(nested);
    }
    return li;
  }

  function schemaBlock(schema, example) {
    const s = flat(schema);
    return h('div', { class: 'schema' },
      prose(s.description, 'pdesc'),
      constraints(s),
      schemaTree(schema),
      example !== undefined && h('details', { class: 'example' }, h('summary', null, 'Example'), h('pre', null, h('code', null, json(example)))));
  }

  // Builds a plausible example value. Request examples skip readOnly fields.
  function example(schema, forRequest = false, seen = new Set(), depth = 0) {
    const name = refName(schema);
    if ((name && seen.has(name)) || depth > 8) return null;
    if (name) seen = new Set(seen).add(name);
    const s = flat(schema, seen);
    if (s.example !== undefined) return s.example;
    if (Array.isArray(s.examples) && s.examples.length) return s.examples[0];
    if (s.default !== undefined) return s.default;
    if ('const' in s) return s.const;
    if (Array.isArray(s.enum) && s.enum.length) return s.enum[0];
    const alts = s.oneOf || s.anyOf;
    if (alts && alts.length) return example(alts[0], forRequest, seen, depth + 1);
    const t = typesOf(s);
    switch (t.find((x) => x !== 'null') || t[0]) {
      case 'object': {
        const o = {};
        for (const [k, v] of Object.entries(s.properties || {})) {
          const p = flat(v, seen);
          if (forRequest ? p.readOnly : p.writeOnly) continue;
          o[k] = example(v, forRequest, seen, depth + 1);
        }
        return o;
      }
      case 'array': return s.items ? [example(s.items, forRequest, seen, depth + 1)] : [];
      case 'string': return { 'date-time': '2025-01-01T00:00:00Z', date: '2025-01-01', uuid: '00000000-0000-0000-0000-000000000000', email: 'user@example.com' }[s.format] || 'string';
      case 'integer': case 'number': return s.minimum ?? 0;
      case 'boolean': return false;
      case 'null': return null;
      default: return s.additionalProperties ? {} : null;
    }
  }

  function mediaExample(media, forRequest) {
    if (media.example !== undefined) return media.example;
    const first = media.examples && Object.values(media.examples)[0];
    if (first) return resolve(first).value;
    return media.schema ? example(media.schema, forRequest) : undefined;
  }

  // ---- operation details ---------------------------------------------------

  function authInfo(op) {
    const reqs = op.security ?? spec.security ?? [];
    // An empty requirement list, or an empty {} alternative, means no auth is needed.
    return { isPublic: !reqs.length || reqs.some((r) => !Object.keys(r).length), schemes: [...new Set(reqs.flatMap(Object.keys))] };
  }

  function paramsTable(params) {
    return h('div', { class: 'table-wrap' }, h('table', null,
      h('thead', null, h('tr', null, ['Name', 'In', 'Type', 'Description'].map((c) => h('th', { scope: 'col' }, c)))),
      h('tbody', null, params.map((p) => {
        const s = flat(p.schema || {});
        return h('tr', null,
          h('td', null, h('code', { class: 'pname' }, p.name), p.required && badge('required', 'b-req'), p.deprecated && badge('deprecated', 'b-warn')),
          h('td', null, p.in),
          h('td', null, h('span', { class: 'ptype' }, typeLabel(p.schema || {})), s.format && h('span', { class: 'pfmt' }, s.format)),
          h('td', null, prose(p.description || s.description, 'pdesc'), constraints(s)));
      }))));
  }

  // One collapsible block per media type; error responses start collapsed because
  // they usually repeat the same envelope schema.
  function contentList(content, forRequest, open = true) {
    return Object.entries(content || {}).map(([mt, media]) => (media.schema
      ? h('details', { class: 'media', open },
        h('summary', null, h('code', null, mt), ' ', h('span', { class: 'ptype' }, typeLabel(media.schema)),
          flat(media.schema).format && h('span', { class: 'pfmt' }, flat(media.schema).format)),
        schemaBlock(media.schema, /json/i.test(mt) ? mediaExample(media, forRequest) : undefined))
      : h('div', { class: 'media' }, h('code', null, mt))));
  }

  function statusClass(code) {
    const c = String(code)[0];
    return c === '2' ? 's-ok' : c === '3' ? 's-redirect' : c === '4' ? 's-client' : c === '5' ? 's-server' : 's-other';
  }

  function responses(op) {
    return h('div', { class: 'responses' }, Object.entries(op.responses || {}).map(([code, raw]) => {
      const r = resolve(raw);
      return h('div', { class: 'response' },
        h('div', { class: 'response-head' }, h('span', { class: `status ${statusClass(code)}` }, code), prose(r.description, 'pdesc inline')),
        Object.keys(r.headers || {}).length > 0 && h('div', { class: 'constraints' }, 'headers',
          Object.entries(r.headers).map(([name, hd]) => h('code', { title: resolve(hd).description || null }, name))),
        contentList(r.content, false, /^2/.test(code)));
    }));
  }

  function renderBody(o) {
    const { op } = o;
    const auth = authInfo(op);
    const body = op.requestBody ? resolve(op.requestBody) : null;
    const meta = h('dl', { class: 'meta' },
      h('dt', null, 'Operation ID'), h('dd', null, op.operationId ? h('code', null, op.operationId) : h('span', { class: 'muted' }, 'none')),
      h('dt', null, 'Access'), h('dd', null, auth.isPublic ? badge('public', 'b-public') : badge('authenticated', 'b-auth'),
        !auth.isPublic && auth.schemes.length ? h('span', { class: 'muted small' }, ` via ${auth.schemes.join(', ')}`) : null),
      op['x-permission'] != null && [h('dt', null, 'Permission'), h('dd', null, h('code', { class: 'perm' }, String(op['x-permission'])))]);
    return h('div', { class: 'op-body' },
      op.deprecated && h('p', { class: 'notice' }, 'This operation is deprecated.'),
      prose(op.description),
      meta,
      o.params.length > 0 && [h('h4', null, 'Parameters'), paramsTable(o.params)],
      body && [h('h4', null, 'Request body', body.required && badge('required', 'b-req')), prose(body.description), contentList(body.content, true)],
      h('h4', null, 'Responses'), responses(op),
      tryIt(o, body),
      h('p', { class: 'permalink' }, h('a', { href: `#${encodeURIComponent(o.key)}` }, 'Link to this operation')));
  }

  // ---- Try it ----------------------------------------------------------------

  function field(label, input, hint) {
    return h('div', { class: 'field' }, h('label', { for: input.id }, label), input, hint && h('span', { class: 'hint' }, hint));
  }

  function paramInput(p) {
    const s = flat(p.schema || {});
    const id = uid('in');
    const t = typesOf(s);
    const first = p.example ?? s.example;
    if (Array.isArray(s.enum) || t.includes('boolean')) {
      const values = Array.isArray(s.enum) ? s.enum : [true, false];
      return h('select', { id, required: p.required }, h('option', { value: '' }, p.required ? 'Select…' : '(not set)'),
        values.map((v) => h('option', { value: String(v) }, String(v))));
    }
    return h('input', { id, type: 'text', required: p.required, value: first != null ? String(first) : null, placeholder: s.default != null ? `default: ${s.default}` : typeLabel(p.schema || {}), spellcheck: 'false', autocomplete: 'off' });
  }

  // Builds the body editor for one media type and returns {node, read()}.
  function bodyEditor(mt, media) {
    const s = flat(media.schema || {});
    if (/^(multipart\/form-data|application\/x-www-form-urlencoded)/i.test(mt)) {
      const parts = Object.entries(s.properties || {}).map(([name, ps]) => {
        const p = flat(ps);
        const item = p.items ? flat(p.items) : null;
        const file = isBinary(p) || (item && isBinary(item));
        const id = uid('part');
        const input = file ? h('input', { id, type: 'file', multiple: !!item })
          : h('input', { id, type: 'text', spellcheck: 'false', placeholder: typeLabel(ps) });
        return { name, file, input, node: field([name, (s.required || []).includes(name) && ' *'], input, p.description) };
      });
      return {
        node: h('div', { class: 'fields' }, parts.map((p) => p.node)),
        read() {
          // Let the browser set the multipart boundary: no explicit Content-Type.
          const multipart = /^multipart/i.test(mt);
          const fd = multipart ? new FormData() : new URLSearchParams();
          for (const p of parts) {
            if (p.file) for (const f of p.input.files) fd.append(p.name, f, f.name);
            else if (p.input.value !== '') fd.append(p.name, p.input.value);
          }
          return { body: fd };
        },
      };
    }
    if (isBinary(s) || /octet-stream|^image\//i.test(mt)) {
      const input = h('input', { id: uid('file'), type: 'file' });
      return { node: field('File', input), read: () => ({ body: input.files[0] || null, type: mt }) };
    }
    const isJson = /json/i.test(mt);
    const ex = isJson ? mediaExample(media, true) : undefined;
    const ta = h('textarea', { id: uid('body'), rows: 8, spellcheck: 'false', class: 'code' });
    ta.value = ex === undefined ? '' : isJson ? json(ex) : String(ex);
    return {
      node: field(isJson ? 'JSON body' : 'Body', ta),
      read() {
        if (isJson && ta.value.trim()) JSON.parse(ta.value); // throws a SyntaxError shown to the user
        return { body: ta.value, type: mt };
      },
    };
  }

  function tryIt(o, body) {
    const inputs = o.params.filter((p) => ['path', 'query', 'header'].includes(p.in)).map((p) => ({ p, input: paramInput(p) }));
    const cookieParams = o.params.filter((p) => p.in === 'cookie');
    const types = Object.keys((body && body.content) || {});
    const bodyBox = h('div', { class: 'body-editor' });
    let editor = null;
    const pick = (mt) => { editor = bodyEditor(mt, body.content[mt]); bodyBox.replaceChildren(editor.node); };
    const typeSelect = types.length > 1 ? h('select', { id: uid('ct'), onchange: (e) => pick(e.target.value) }, types.map((t) => h('option', { value: t }, t))) : null;
    if (types.length) pick(types[0]);
    const result = h('div', { class: 'result', 'aria-live': 'polite' });
    const sendBtn = h('button', { type: 'submit', class: 'btn-primary' }, 'Send request');

    async function send(ev) {
      ev.preventDefault();
      const query = new URLSearchParams();
      const headers = new Headers();
      let path = o.path;
      for (const { p, input } of inputs) {
        const v = input.value;
        if (v === '') continue;
        if (p.in === 'path') path = path.split(`{${p.name}}`).join(encodeURIComponent(v));
        else if (p.in === 'header') headers.set(p.name, v);
        else if (typesOf(flat(p.schema || {})).includes('array')) v.split(',').forEach((x) => query.append(p.name, x.trim()));
        else query.append(p.name, v);
      }
      const key = apiKey.value.trim();
      if (key) headers.set('X-API-Key', key);
      const init = { method: o.method.toUpperCase(), headers, credentials: 'same-origin', cache: 'no-store' };
      if (editor) {
        try {
          const { body: b, type } = editor.read();
          if (b != null) init.body = b;
          if (type && b != null) headers.set('Content-Type', type);
        } catch (err) {
          result.replaceChildren(h('p', { class: 'api-error', role: 'alert' }, `Invalid request body: ${err.message}`));
          return;
        }
      }
      const qs = query.toString();
      const url = apiBase + path + (qs ? `?${qs}` : '');
      sendBtn.disabled = true;
      result.replaceChildren(h('p', { class: 'muted' }, 'Sending…'));
      const t0 = performance.now();
      try {
        const res = await fetch(url, init);
        const ct = res.headers.get('content-type') || '';
        const textual = !ct || /json|text|xml|javascript|problem/i.test(ct);
        const payload = textual ? await res.text() : await res.blob();
        showResult(result, init.method, url, res, payload, performance.now() - t0);
      } catch (err) {
        result.replaceChildren(h('p', { class: 'api-error', role: 'alert' }, `Request failed: ${err.message}`));
      } finally {
        sendBtn.disabled = false;
      }
    }

    return h('section', { class: 'try', 'aria-label': `Try ${o.method.toUpperCase()} ${o.path}` },
      h('h4', null, 'Try it'),
      h('form', { onsubmit: send },
        inputs.length ? h('div', { class: 'fields' }, inputs.map(({ p, input }) =>
          field([p.name, h('span', { class: 'in' }, p.in), p.required && ' *'], input, p.description))) : null,
        cookieParams.length ? h('p', { class: 'muted small' }, `Cookie parameters (${cookieParams.map((p) => p.name).join(', ')}) are sent by the browser if set.`) : null,
        typeSelect && field('Content type', typeSelect),
        types.length ? bodyBox : null,
        h('div', { class: 'actions' }, sendBtn, h('button', { type: 'button', class: 'btn-ghost', onclick: () => result.replaceChildren() }, 'Clear'))),
      result);
  }

  // Lightweight JSON highlighting built from text nodes only.
  function highlight(text) {
    const code = h('code');
    const re = /("(?:\\.|[^"\\])*")(\s*:)?|\b(true|false|null)\b|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?/g;
    let last = 0;
    for (let m; (m = re.exec(text));) {
      code.append(text.slice(last, m.index));
      const cls = m[1] ? (m[2] ? 'j-key' : 'j-str') : m[3] ? 'j-lit' : 'j-num';
      code.append(h('span', { class: cls }, m[1] || m[0]), m[2] || '');
      last = re.lastIndex;
    }
    code.append(text.slice(last));
    return code;
  }

  function showResult(box, method, url, res, payload, ms) {
    const nodes = [h('div', { class: 'result-head' },
      h('span', { class: `status ${statusClass(res.status)}` }, `${res.status} ${res.statusText}`.trim()),
      h('code', { class: 'req-line' }, `${method} ${url}`),
      h('span', { class: 'elapsed' }, `${Math.round(ms)} ms`))];
    let data;
    if (typeof payload === 'string' && payload) {
      try { data = JSON.parse(payload); } catch { /* not JSON */ }
    }
    const err = data && typeof data === 'object' && data.error && typeof data.error === 'object' ? data.error : null;
    if (err) {
      nodes.push(h('div', { class: 'api-error', role: 'alert' },
        h('code', { class: 'err-code' }, String(err.code ?? 'error')), h('span', { class: 'err-msg' }, String(err.message ?? ''))));
    }
    // content-type and x-request-id first: they are what people look for.
    const hdrs = [...res.headers].sort(([a], [b]) => {
      const rank = (n) => (n === 'content-type' ? 0 : n === 'x-request-id' ? 1 : 2);
      return rank(a) - rank(b) || a.localeCompare(b);
    });
    nodes.push(h('details', { class: 'headers', open: true }, h('summary', null, `Response headers (${hdrs.length})`),
      h('dl', null, hdrs.map(([k, v]) => [h('dt', null, k), h('dd', null, v)]))));
    if (payload instanceof Blob) {
      const link = h('a', { href: URL.createObjectURL(payload), download: 'response' }, `Download body (${payload.size} bytes, ${payload.type || 'binary'})`);
      nodes.push(h('p', null, link));
    } else if (data !== undefined) {
      nodes.push(h('pre', { class: 'resp-body' }, highlight(json(data))));
    } else {
      const text = payload.length > 200000 ? `${payload.slice(0, 200000)}\n… (truncated)` : payload;
      nodes.push(text ? h('pre', { class: 'resp-body' }, h('code', null, text)) : h('p', { class: 'muted small' }, 'Empty body'));
    }
    box.replaceChildren(...nodes);
  }

  // ---- page ------------------------------------------------------------------

  function computeBase() {
    const server = (spec.servers && spec.servers[0]) || { url: '/' };
    const raw = String(server.url || '/').replace(/\{([^}]+)\}/g, (_, n) => server.variables?.[n]?.default ?? '');
    // Server URLs are relative to the document. connect-src 'self' only allows
    // same-origin requests anyway, so only the path of the server URL is kept.
    return new URL(raw, new URL(specUrl, location.href)).pathname.replace(/\/+$/, '');
  }

  function mergeParams(common = [], own = []) {
    const map = new Map();
    for (const raw of [...common, ...own]) { const p = resolve(raw); map.set(`${p.in}:${p.name}`, p); }
    return [...map.values()];
  }

  function renderIntro() {
    const info = spec.info || {};
    $('api-title').textContent = info.title || 'API reference';
    document.title = `${info.title || 'API'} – API reference`;
    if (info.version) { $('api-version').textContent = info.version; $('api-version').hidden = false; }
    const schemes = Object.entries(spec.components?.securitySchemes || {}).map(([name, raw]) => {
      const s = resolve(raw);
      const how = s.type === 'apiKey' ? [`API key in ${s.in} `, h('code', null, s.name)]
        : s.type === 'http' ? `HTTP ${s.scheme || ''}${s.bearerFormat ? ` (${s.bearerFormat})` : ''}` : s.type;
      return h('li', null, h('strong', null, name), ': ', how, s.description ? [' — ', s.description] : null);
    });
    // replaceChildren() does not skip null or flatten arrays, so wrap via h().
    $('intro').replaceChildren(h('div', null,
      prose(info.description),
      h('dl', { class: 'meta' },
        h('dt', null, 'Base path'), h('dd', null, h('code', null, location.origin + (apiBase || '/'))),
        h('dt', null, 'OpenAPI'), h('dd', null, spec.openapi || '?', ' · ', h('a', { href: specUrl }, 'download document'))),
      schemes.length ? [h('h2', { class: 'small-h' }, 'Authentication'), h('ul', { class: 'schemes' }, schemes),
        h('p', { class: 'muted small' }, 'Try it sends the API key entered above as X-API-Key; same-origin cookies are sent too.')] : null));
  }

  function renderOps() {
    for (const [path, rawItem] of Object.entries(spec.paths || {})) {
      const item = resolve(rawItem);
      for (const method of METHODS) {
        const op = item[method];
        if (!op) continue;
        let key = op.operationId || `${method}-${path}`.replace(/[^A-Za-z0-9_.-]+/g, '-');
        while (byKey.has(key)) key += '_';
        const o = { key, method, path, op, params: mergeParams(item.parameters, op.parameters), tag: (op.tags && op.tags[0]) || '' };
        o.haystack = [method, path, op.summary, op.operationId, o.tag, op['x-permission']].join(' ').toLowerCase();
        ops.push(o);
        byKey.set(key, o);
      }
    }
    const order = (spec.tags || []).map((t) => t.name);
    for (const o of ops) if (o.tag && !order.includes(o.tag)) order.push(o.tag);
    if (ops.some((o) => !o.tag)) order.push('');
    const nav = $('nav');
    const main = $('ops');
    order.forEach((tag, i) => {
      const list = ops.filter((o) => o.tag === tag);
      if (!list.length) return;
      const tagInfo = (spec.tags || []).find((t) => t.name === tag) || {};
      const hid = `group-${i}`;
      const g = { ops: list };
      g.nav = h('div', { class: 'nav-group' }, h('p', { class: 'nav-tag', id: `nav-${hid}` }, tag || 'Other'),
        h('ul', { 'aria-labelledby': `nav-${hid}` }, list.map((o) => {
          o.navEl = h('li', null, h('a', { href: `#${encodeURIComponent(o.key)}`, onclick: () => reveal(o.key) }, methodBadge(o.method), h('span', { class: 'nav-path' }, breakable(o.path))));
          return o.navEl;
        })));
      g.section = h('section', { class: 'group', 'aria-labelledby': hid }, h('h2', { id: hid }, tag || 'Other'), prose(tagInfo.description),
        list.map((o) => {
          const auth = authInfo(o.op);
          o.summaryEl = h('summary', null, h('h3', null, methodBadge(o.method), h('code', { class: 'path' }, o.path),
            h('span', { class: 'op-summary' }, o.op.summary || '')),
          h('span', { class: 'op-flags' }, auth.isPublic && badge('public', 'b-public'), o.op.deprecated && badge('deprecated', 'b-warn')));
          o.el = h('details', { class: `op op-${o.method}${o.op.deprecated ? ' deprecated' : ''}`, id: `op-${o.key}` }, o.summaryEl);
          // Render the (large) body lazily on first open; keep the URL shareable.
          o.el.addEventListener('toggle', () => {
            if (!o.el.open) return;
            ensureRendered(o);
            if (decodeHash() !== o.key) history.replaceState(null, '', `#${encodeURIComponent(o.key)}`);
          });
          return o.el;
        }));
      nav.append(g.nav);
      main.append(g.section);
      groups.push(g);
    });
    if (!ops.length) main.append(h('p', { class: 'muted' }, 'This document has no operations.'));
  }

  function ensureRendered(o) {
    if (!o.rendered) { o.rendered = true; o.el.append(renderBody(o)); }
  }

  // Long paths wrap after a slash rather than mid-segment.
  const breakable = (path) => path.split('/').flatMap((seg, i) => (i ? [h('wbr'), `/${seg}`] : [seg]));

  function applyFilter() {
    const terms = $('op-filter').value.toLowerCase().split(/\s+/).filter(Boolean);
    let shown = 0;
    for (const o of ops) {
      const hit = terms.every((t) => o.haystack.includes(t));
      o.el.hidden = o.navEl.hidden = !hit;
      shown += hit;
    }
    for (const g of groups) g.section.hidden = g.nav.hidden = g.ops.every((o) => o.el.hidden);
    $('filter-status').textContent = terms.length ? `${shown} of ${ops.length} operations` : '';
  }

  function decodeHash() {
    try { return decodeURIComponent(location.hash.slice(1)); } catch { return ''; }
  }

  function reveal(key) {
    const o = byKey.get(key);
    if (!o) return;
    if (o.el.hidden) { $('op-filter').value = ''; applyFilter(); }
    for (const x of ops) x.navEl.querySelector('a').removeAttribute('aria-current');
    o.navEl.querySelector('a').setAttribute('aria-current', 'location');
    ensureRendered(o); // render before scrolling so the layout is final
    o.el.open = true;
    o.el.scrollIntoView({ block: 'start' });
    o.summaryEl.focus({ preventScroll: true });
  }

  async function load() {
    const headers = { Accept: 'application/json' };
    if (apiKey.value.trim()) headers['X-API-Key'] = apiKey.value.trim();
    try {
      const res = await fetch(specUrl, { credentials: 'same-origin', headers });
      if (!res.ok) throw new Error(`HTTP ${res.status} ${res.statusText}`);
      spec = await res.json();
    } catch (err) {
      $('intro').replaceChildren(h('div', { class: 'api-error', role: 'alert' }, `Could not load the API description (${specUrl}): ${err.message}`),
        h('p', null, h('button', { type: 'button', class: 'btn-primary', onclick: load }, 'Retry'), h('span', { class: 'muted small' }, ' (enter an API key above first if the document needs one)')));
      return;
    }
    apiBase = computeBase();
    renderIntro();
    renderOps();
    if (location.hash) reveal(decodeHash());
  }

  $('op-filter').addEventListener('input', applyFilter);
  $('op-filter').addEventListener('keydown', (e) => { if (e.key === 'Escape') { e.target.value = ''; applyFilter(); } });
  document.addEventListener('keydown', (e) => {
    const t = e.target;
    if (e.key === '/' && !(t instanceof HTMLInputElement || t instanceof HTMLTextAreaElement || t instanceof HTMLSelectElement)) {
      e.preventDefault();
      $('op-filter').focus();
    }
  });
  $('api-key-toggle').addEventListener('click', (e) => {
    const show = apiKey.type === 'password';
    apiKey.type = show ? 'text' : 'password';
    e.target.textContent = show ? 'Hide' : 'Show';
    e.target.setAttribute('aria-pressed', String(show));
  });
  window.addEventListener('hashchange', () => reveal(decodeHash()));
  load();
})();
