// The API's requests and answers as the panel names them: the schemas of the OpenAPI document
// (../openapi.json, written from the Go route table and package api), whose TypeScript form
// make ui generates into openapi.d.ts. Nothing is declared here by hand.
import type { components } from './openapi'

type Schemas = components['schemas']

export type Discovery = Schemas['Discovery']
export type Principal = Schemas['Principal']
export type Session = Schemas['SessionRecord']
export type Key = Schemas['KeyRecord']
export type CreatedKey = Schemas['CreatedKey']
export type KeysMeta = Schemas['KeysMeta']
export type AuditEntry = Schemas['AuditEntry']
export type Worker = Schemas['WorkerRecord']
export type WorkerTraffic = Schemas['WorkerTraffic']
export type PoolProcess = Schemas['PoolProcess']
export type Cluster = Schemas['Cluster']
export type ClusterInstance = Schemas['ClusterInstance']
export type LogLine = Schemas['WorkerLogLine']
export type PluginRecord = Schemas['PluginRecord']
export type PluginMenu = Schemas['PluginMenu']
export type LoadedPlugin = Schemas['LoadedPlugin']
export type PluginConfig = Schemas['PluginConfig']
export type ReloadSummary = Schemas['PluginReload']
export type FileEntry = Schemas['FileEntry']
export type FileListing = Schemas['FileListing']
export type StatsSeries = Schemas['StatsSeries']
export type RuntimeStats = Schemas['RuntimeStats']
export type WorkerStats = Schemas['WorkerStats']
export type SecretRecord = Schemas['SecretRecord']
export type WorkerSecrets = Schemas['WorkerSecrets']
export type SecretsChanged = Schemas['SecretsChanged']
export type WorkerDomain = Schemas['WorkerDomain']
