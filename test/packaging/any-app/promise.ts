// @connector-store/promise from an app that imports nothing of Effect: a
// write-back cycle and two refused calls on memory, on SQLite (argv[3]) and on
// Postgres (argv[4], when given), in tables prefixed with argv[2]. Each
// rejection keeps its `_tag` and `method`.
import {
  IdempotencyConflict,
  isStoreError,
  openConnectorStore,
  openMemoryConnectorStore,
  type PromiseConnectorStore
} from "@connector-store/promise"
import { claimInput, expectEqual, keyOf, watchOf } from "./input.js"

const [tablePrefix, sqliteFile, postgresUrl] = process.argv.slice(2)
if (tablePrefix === undefined || sqliteFile === undefined) throw new Error("usage: promise.js <table prefix> <sqlite file> [postgres url]")

const cycle = async <H>(store: PromiseConnectorStore<H>, label: string): Promise<void> => {
  const claim = await store.claimOperation(claimInput(label))
  if (claim.outcome !== "claimed") throw new Error(`claimOperation: expected claimed, got ${claim.outcome}`)
  const leaseToken = claim.lease.token
  expectEqual("markOperationSent", (await store.markOperationSent(keyOf(label), { leaseToken })).outcome, "sent")
  const finalized = await store.finalizeOperationAndArmWatch(keyOf(label), {
    leaseToken,
    sourceID: `src-${label}`,
    documentID: `doc-${label}`,
    providerEtag: "etag-1",
    resultEntity: { id: `src-${label}` },
    watchDueAt: 0
  })
  expectEqual("finalizeOperationAndArmWatch", finalized.outcome, "committed")

  const conflict: unknown = await store.claimOperation(claimInput(label, "sha256:other")).then(() => undefined, (error: unknown) => error)
  expectEqual("a reused key's rejection is an Error", conflict instanceof Error, true)
  expectEqual("a reused key's rejection is an IdempotencyConflict", conflict instanceof IdempotencyConflict, true)
  expectEqual("a reused key's _tag", (conflict as { _tag?: unknown })._tag, "IdempotencyConflict")
  expectEqual("a reused key's method", (conflict as { method?: unknown }).method, "claimOperation")

  const refused: unknown = await store.armWatch(watchOf(label, ""), "manual", { dueAt: 0 }).then(() => undefined, (error: unknown) => error)
  expectEqual("a bad identity's rejection is a store error", isStoreError(refused), true)
  if (!isStoreError(refused) || refused._tag !== "InvalidInput") throw new Error(`armWatch: expected InvalidInput, got ${String(refused)}`)
  expectEqual("a bad identity's field", refused.field, "identity.ownerDID")
}

// The document store's converged state, which the store reads when it finalizes a write.
const readWinner = async (documentID: string): Promise<string | null> => documentID === "doc-any" ? "w1" : null

const memory = openMemoryConnectorStore({ readWinner })
await cycle(memory, "any")
await memory.close()
console.log("memory: Promise API ok, rejections tagged")

for (const [name, url] of [["sqlite", sqliteFile], ...(postgresUrl === undefined ? [] : [["postgres", postgresUrl]])]) {
  const store = await openConnectorStore({ url: url!, tablePrefix, readWinner })
  try {
    await cycle(store, "any")
  } finally {
    await store.close()
  }
  console.log(`${name}: Promise API ok, rejections tagged`)
}
