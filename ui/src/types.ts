// The API's answers as the panel reads them: only the fields it shows (the OpenAPI document at
// <api>/openapi.json has them all).

export interface Worker {
  name: string
  source: string
  versions: string[]
  disabledVersions: string[]
  removable: boolean
  sizes: Record<string, number>
}

export interface PoolProcess {
  worker: string
  state: string
  restarts: number
}

export interface LogLine {
  seq: number
  time: string
  version: string
  pid: number
  stream: string
  text: string
}

export interface Key {
  id: number
  name: string
  keyPrefix: string
  role: string
  namespaces: string[]
  createdAt: number
  expiresAt?: number
  lastUsedAt?: number
}

export interface CreatedKey {
  name: string
  key: string
}

export interface KeysMeta {
  roles: string[]
  permissions: string[]
}

export interface Session {
  id: number
  createdAt: number
  lastSeenAt: number
  userAgent: string
  current: boolean
}

export interface AuditEntry {
  id: number
  time: string
  actor?: { name: string }
  action: string
  target: string
  outcome: string
}

export interface PluginRecord {
  name: string
  version: string
  enabled: boolean
  removable: boolean
}

export interface PluginMenu {
  title: string
  icon: string
  path: string
}

export interface LoadedPlugin {
  name: string
  base?: string
  dependencies: string[]
  menus: PluginMenu[]
}

export interface PluginConfig {
  name: string
  manifest?: { base?: string; dependencies: string[] }
  load?: { state: string; error?: string; position?: number; reason?: string }
}

export interface ReloadSummary {
  plugins: { name: string }[]
  failed: { name: string; error: string }[]
}

export interface FileEntry {
  name: string
  path: string
  isDirectory: boolean
  size: number
  updatedAt: number
  visibility: string
}

export interface FileListing {
  path: string
  writable: boolean
  entries: FileEntry[]
}
