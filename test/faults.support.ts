import type { ClaimOperationInput, OperationKey, PromiseConnectorStore } from "@connector-store/core"
import { STORE_ERROR_TAGS } from "@connector-store/testkit"
import pg from "pg"
import { expect } from "vitest"

/** Asserts `error` is one of the store's tagged errors (never a raw `pg` or `SqlError`). */
export const expectTyped = (error: unknown, during: string): void => {
  const tag = typeof error === "object" && error !== null ? (error as { readonly _tag?: unknown })._tag : undefined
  expect(typeof tag === "string" && STORE_ERROR_TAGS.has(tag), `${during} rejected untyped: ${String(error)}`).toBe(true)
}

/** The rejection of `promise`, failing the test when it resolves. */
export const rejectionOf = async (promise: Promise<unknown>): Promise<unknown> => {
  try {
    const value = await promise
    throw new Error(`expected a rejection, got ${JSON.stringify(value)}`)
  } catch (error) {
    return error
  }
}

/** The key of operation `id` of the callers these tests claim for (see `claimFor`). */
export const faultKey = (id: string): OperationKey => ({ callerDID: "did:caller:faults", operationID: id })

/** Operation `id` claimed (`claimFor`) and marked sent on `store`: its key, and the input that finalizes it to `src-<id>` from `doc-<id>`. */
export const sentOperation = async (
  store: Pick<PromiseConnectorStore<unknown>, "claimOperation" | "markOperationSent"> & { now(): number },
  id: string
) => {
  const claim = await store.claimOperation(claimFor(id))
  if (claim.outcome !== "claimed") throw new Error(`expected claimed, got ${claim.outcome}`)
  const key = faultKey(id)
  expect((await store.markOperationSent(key, { leaseToken: claim.lease.token })).outcome).toBe("sent")
  const finalize = { leaseToken: claim.lease.token, sourceID: `src-${id}`, documentID: `doc-${id}`, watchDueAt: store.now() }
  return { key, finalize }
}

/** A claim of operation `id` of `callerDID`, updating source `src-<id>` from `doc-<id>`. */
export const claimFor = (id: string, overrides: Partial<ClaimOperationInput> = {}): ClaimOperationInput => ({
  callerDID: "did:caller:faults",
  operationID: id,
  ownerDID: "did:owner:faults",
  connectorName: "gcal",
  model: "Event",
  op: "update",
  accountKey: "acct-1",
  target: "calendar/primary",
  sourceID: `src-${id}`,
  deterministicEventID: `event-${id}`,
  payloadHash: `hash-${id}`,
  reissueIntent: { kind: "conditional-update", ifMatch: "etag-0" },
  providerEtag: "etag-0",
  documentID: `doc-${id}`,
  ...overrides
})

/** Runs `use` on a fresh admin connection to `url` (not through the store). */
export const withClient = async <A>(url: string, use: (client: pg.Client) => Promise<A>): Promise<A> => {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    return await use(client)
  } finally {
    await client.end()
  }
}

/** One operation row as the database holds it, in the columns the fault tests check. */
export interface StoredOperation {
  readonly operation_id: string
  readonly state: string
  readonly attempts: number
  readonly version: number
  readonly send_marker: string | null
  readonly lease_token: string | null
  readonly source_id: string | null
  readonly document_id: string | null
  readonly result_entity: string | null
}

/** One watch row as the database holds it. */
export interface StoredWatch {
  readonly source_id: string
  readonly document_id: string
  readonly repair_generation: number
  readonly verification_status: string
  readonly version: number
}

/** Every operation and watch under `prefix`, read by an admin connection. */
export const storedRows = (url: string, prefix: string) =>
  withClient(url, async (client) => ({
    operations: (await client.query<StoredOperation>(
      `SELECT operation_id, state, attempts, version, send_marker, lease_token, source_id, document_id, result_entity
       FROM ${prefix}operation ORDER BY operation_id`
    )).rows,
    watches: (await client.query<StoredWatch>(
      `SELECT source_id, document_id, repair_generation, verification_status, version
       FROM ${prefix}projection_watch ORDER BY source_id`
    )).rows
  }))

/** Resolves after `ms` milliseconds. */
export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))
