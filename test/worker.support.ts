import type { ConnectorOperation, EnqueueOperationInput, OperationState, PromiseConnectorStore } from "@connector-store/core"
import { openMemoryConnectorStore } from "@connector-store/memory-adapter"
import { openConnectorStore } from "@connector-store/sql-adapter"
import { FakeProvider, ProviderError, type RequestFate, type WriteAnswer, type WriteRequest } from "@connector-store/testkit/provider"
import type { Connector, WorkerStore } from "@connector-store/worker"
import type { AdapterUnderTest } from "./support/stores.js"

/** A Promise store the worker runs on, with the clock it decides by. */
export type TestStore = PromiseConnectorStore<unknown> & WorkerStore

/** The local documents: what each document's winner is (the digest its write-back sends). */
export type Documents = Map<string, string>

/** A policy that retries at once, so that a test's backlog drains in a moment. */
export const FAST_POLICY = { leaseMs: 5_000, maxAttempts: 8, backoff: { baseDelayMs: 1, maxDelayMs: 4, jitter: "none" as const }, deferMs: 5 }

/**
 * Opens stores on one database of `adapter` (the memory adapter: one store, shared), winners read from `documents`. Each
 * call of the answer opens another store on the same database; `closeAll` closes them.
 */
export const storesOn = async (adapter: AdapterUnderTest, documents: Documents, options: { readonly now?: () => number; readonly policy?: typeof FAST_POLICY } = {}) => {
  const connection = await adapter.connection()
  const opened: Array<TestStore> = []
  const readWinner = (documentID: string) => documents.get(documentID) ?? null
  const policy = options.policy ?? FAST_POLICY
  let memory: TestStore | undefined
  const open = async (): Promise<TestStore> => {
    if (adapter.name === "memory") {
      memory ??= openMemoryConnectorStore({ readWinner, operationPolicy: policy, ...(options.now === undefined ? {} : { now: options.now }) }) as unknown as TestStore
      if (!opened.includes(memory)) opened.push(memory)
      return memory
    }
    const store = await openConnectorStore({ ...connection, readWinner, operationPolicy: policy, ...(options.now === undefined ? {} : { now: options.now }) }) as unknown as TestStore
    opened.push(store)
    return store
  }
  return { open, closeAll: async () => { for (const store of opened.splice(0)) await store.close() } }
}

/**
 * The edit of entity `n`: an update of `evt-n` (seeded at the provider; `ifMatch` its etag there), a create of `new-n`, or a
 * delete of `evt-n`; each with its safe reissue intent unless `safe` is false.
 */
export const editOf = (n: number, op: "create" | "update" | "delete", options: { readonly safe?: boolean; readonly ifMatch?: string } = {}): EnqueueOperationInput => ({
  callerDID: "did:example:laptop",
  operationID: `edit-${n}`,
  ownerDID: `did:example:owner-${n % 5}`,
  connectorName: "gcal",
  model: "Event",
  op,
  accountKey: `account-${n % 5}`,
  target: "calendars/primary",
  sourceID: op === "create" ? null : `evt-${n}`,
  deterministicEventID: `local-${n}`,
  payloadHash: op === "delete" ? `deleted-${n}` : `digest-${n}`,
  documentID: `doc-${n}`,
  reissueIntent: options.safe === false
    ? { kind: "reconcile" }
    : op === "update"
    ? { kind: "conditional-update", ifMatch: options.ifMatch ?? "etag-base" }
    : op === "create"
    ? { kind: "deterministic-create", providerID: `new-${n}` }
    : { kind: "idempotent-delete" }
})

/** A deterministic random number source (mulberry32). */
export const seeded = (seed: number) => () => {
  seed = (seed + 0x6d2b79f5) | 0
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296
}

/** The answer as a client sees it: the entity, or a `ProviderError`. */
const answered = (answer: WriteAnswer) => {
  if (answer.status === 200) return answer.entity
  if (answer.status === 204) return null
  throw new ProviderError(answer.status, answer.status === 429 ? answer.retryAfterMs : undefined)
}

/**
 * The `gcal` connector over a fake provider, as a user would write it: a plain first send, a re-send only as the claim's
 * `reissue` says (its request marked as that reissue in the ledger), a lookup by idempotency key. `delay` waits before each
 * request (a slow provider).
 */
export const fakeConnector = (provider: FakeProvider, actor: string, options: { readonly delay?: () => number; readonly lookup?: boolean } = {}): Connector => ({
  send: async (operation, { reissue }) => {
    const ms = options.delay?.() ?? 0
    if (ms > 0) await new Promise((resolve) => setTimeout(resolve, ms))
    const key = `${operation.callerDID}/${operation.operationID}`
    const base = { key, documentID: operation.documentID, digest: operation.payloadHash }
    const intent = operation.reissueIntent as { readonly kind: string; readonly providerID?: string }
    const request: WriteRequest = operation.op === "create"
      ? {
        ...base, op: "create", reissue: reissue?.kind === "deterministic-create" ? "deterministic-create" : null,
        ...(intent.kind === "deterministic-create" ? { providerID: intent.providerID! } : {})
      }
      : operation.op === "update"
      ? {
        ...base, op: "update", entityID: operation.sourceID!,
        ...(reissue?.kind === "conditional-update" ? { ifMatch: reissue.ifMatch, reissue: "conditional-update" as const } : { reissue: null })
      }
      : { key, op: "delete", entityID: operation.sourceID!, documentID: operation.documentID, reissue: reissue === null ? null : "idempotent-delete" }
    return answered(await provider.write(actor, request))
  },
  ...(options.lookup === false ? {} : {
    lookup: async (operation) => {
      const found = await provider.lookup(actor, `${operation.callerDID}/${operation.operationID}`)
      return found === null ? null : { id: found.id, etag: found.etag, digest: found.digest }
    }
  }),
  verify: async (watch) => provider.entities.get(watch.sourceID)?.digest ?? null
})

/** A provider whose requests meet `fate` (else `ok`), its Retry-After short. */
export const providerWith = (fate: (request: WriteRequest, n: number) => RequestFate) =>
  new FakeProvider({ fates: fate, retryAfterMs: 5 })

/** Every operation of the test's caller, by state. */
export const operationsByState = async (store: TestStore, count: number): Promise<Map<OperationState, Array<ConnectorOperation>>> => {
  const out = new Map<OperationState, Array<ConnectorOperation>>()
  for (let n = 0; n < count; n++) {
    const row = await store.getOperation({ callerDID: "did:example:laptop", operationID: `edit-${n}` })
    if (row === null) throw new Error(`edit-${n} is not stored`)
    out.set(row.state, [...(out.get(row.state) ?? []), row])
  }
  return out
}

/** Resolves once `done()` holds, checking every 20 ms; rejects after `timeoutMs`. */
export const eventually = async (done: () => Promise<boolean> | boolean, timeoutMs = 30_000, what = "the condition"): Promise<void> => {
  const deadline = Date.now() + timeoutMs
  while (!(await done())) {
    if (Date.now() > deadline) throw new Error(`${what} did not hold within ${timeoutMs} ms`)
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}
