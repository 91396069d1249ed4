import { StoreSnapshot } from "@connector-store/core"
import * as Memory from "@connector-store/memory-adapter"
import * as Sql from "@connector-store/sql-adapter"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { claimInput, KEY } from "./operations.fixtures.js"
import { NOW } from "./support/contract/fixtures.js"
import { freshSqlitePath } from "./support/databases.js"

const stores = [
  { name: "memory", open: () => Promise.resolve(Memory.openMemoryConnectorStore({ now: () => NOW, readWinner: () => "w-1" })) },
  { name: "sqlite", open: () => Sql.openConnectorStore({ url: freshSqlitePath(), now: () => NOW, readWinner: () => "w-1" }) }
] as const

// Each value JSON would silently change (a Date becomes a string, a Map `{}`,
// NaN `null`, an undefined field vanishes): the path named in the reason.
const notJson: ReadonlyArray<readonly [string, unknown, string]> = [
  ["a Date", { at: new Date(NOW) }, `$."at" is not a plain object`],
  ["a Map", { byID: new Map([["a", 1]]) }, `$."byID" is not a plain object`],
  ["NaN", { items: [1, Number.NaN] }, "$.\"items\"[1] is a non-finite number"],
  ["an undefined field", { etag: undefined }, `$."etag" is a undefined, not a JSON value`]
]

describe.each(stores)("JSON columns refuse what JSON would change, alike, on $name", ({ open }) => {
  it.each(notJson)("finalize's resultEntity with %s is refused naming the field and path; nothing changes", async (_label, value, path) => {
    const store = await open()
    try {
      const claim = await store.claimOperation(claimInput())
      if (claim.outcome !== "claimed") throw new Error(claim.outcome)
      await store.markOperationSent(KEY, { leaseToken: claim.lease.token })
      const before = await store.runEffect(Effect.flatMap(StoreSnapshot, (s) => s.snapshot))
      const finalize = store.finalizeOperationAndArmWatch(KEY, {
        leaseToken: claim.lease.token,
        sourceID: "src-1",
        documentID: "doc-1",
        providerEtag: "etag-1",
        resultEntity: value,
        watchDueAt: NOW + 5_000
      })
      await expect(finalize).rejects.toMatchObject({
        _tag: "InvalidInput",
        method: "finalizeOperationAndArmWatch",
        field: "options.resultEntity",
        reason: `must be a JSON value: ${path}`
      })
      expect(await store.runEffect(Effect.flatMap(StoreSnapshot, (s) => s.snapshot))).toEqual(before)
    } finally {
      await store.close()
    }
  })

  it.each(notJson)("a sync checkpoint with %s is refused the same way", async (_label, value, path) => {
    const store = await open()
    try {
      await expect(store.setSyncState("gcal", "did:owner:1", { status: "idle", lastSyncedAt: "", entityCount: 0, checkpoint: value as never }))
        .rejects.toMatchObject({ _tag: "InvalidInput", method: "setSyncState", field: "state.checkpoint", reason: `must be a JSON value: ${path}` })
    } finally {
      await store.close()
    }
  })
})
