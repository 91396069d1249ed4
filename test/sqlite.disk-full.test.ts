import { ConnectorStore } from "@connector-store/core"
import { layerClient, openConnectorStore, type SqlConnectorStore } from "@connector-store/sql-adapter"
import { SqlClient } from "@effect/sql"
import { Effect, ManagedRuntime } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import { claimFor, faultKey, rejectionOf, sentOperation } from "./faults.support.js"
import { freshSqlitePath } from "./support/databases.js"

/**
 * A SQLite file that cannot grow (a full disk, here `PRAGMA max_page_count`
 * on the connection every store of this process shares for the file): each
 * write that needs room fails `disk-full` whole, whichever API and runner
 * made it, reads are still answered, and once there is room again the same
 * calls succeed.
 */

const closing: Array<() => Promise<void>> = []
afterEach(async () => {
  for (const close of closing.splice(0)) await close()
})

const key = faultKey

/** The file's page limit, set on the connection the store shares (`pages` undefined: as many as it has now). */
const limitPages = (url: string) => {
  const runtime = ManagedRuntime.make(layerClient({ url }))
  closing.push(() => runtime.dispose())
  return (pages?: number) =>
    runtime.runPromise(Effect.flatMap(SqlClient.SqlClient, (sql) =>
      Effect.gen(function*() {
        const rows = (yield* sql.unsafe("PRAGMA page_count")) as unknown as ReadonlyArray<{ readonly page_count: number }>
        yield* sql.unsafe(`PRAGMA max_page_count = ${pages ?? rows[0]!.page_count}`)
      })))
}

/** A claimed and sent operation `id`: the input that finalizes it. */
const sent = async (store: SqlConnectorStore, id: string) => (await sentOperation(store, id)).finalize

const identityOf = (id: string) => ({
  ownerDID: "did:owner:faults",
  connectorName: "gcal",
  model: "Event",
  accountKey: "acct-1",
  sourceID: `src-${id}`
})

describe("a SQLite file that cannot grow", () => {
  it("fails each write that needs room with disk-full, whole, on both APIs; reads go on; with room again the same calls succeed", async () => {
    const url = freshSqlitePath()
    const store = await openConnectorStore({ url, readWinner: () => "winner-1" })
    closing.push(() => store.close())
    const ids = Array.from({ length: 60 }, (_, i) => `full-${String(i).padStart(2, "0")}`)
    const finalizes = new Map<string, Awaited<ReturnType<typeof sent>>>()
    for (const id of ids) finalizes.set(id, await sent(store, id))
    const limit = limitPages(url)
    await limit()

    const failed: Array<string> = []
    for (const [i, id] of ids.entries()) {
      const finalize = finalizes.get(id)!
      const call = i % 2 === 0
        ? store.finalizeOperationAndArmWatch(key(id), finalize)
        : store.runEffect(Effect.flatMap(ConnectorStore, (s) => s.finalizeOperationAndArmWatch(key(id), finalize)))
      const answer = await call.then((value) => ({ value }), (error: unknown) => ({ error }))
      if ("error" in answer) {
        expect(answer.error, id).toMatchObject({ _tag: "PersistenceError", reason: "disk-full", method: "finalizeOperationAndArmWatch" })
        failed.push(id)
      } else {
        expect(answer.value.outcome, id).toBe("committed")
      }
    }
    // Not vacuous: the file ran out of room for some of them, on both APIs.
    expect(failed.length).toBeGreaterThan(1)
    expect(failed.some((id) => ids.indexOf(id) % 2 === 0) && failed.some((id) => ids.indexOf(id) % 2 === 1)).toBe(true)
    const newClaim = await rejectionOf(store.claimOperation(claimFor("full-new")))
    expect(newClaim).toMatchObject({ _tag: "PersistenceError", reason: "disk-full", method: "claimOperation" })

    // Each finalize applied whole or not at all; the refused claim wrote nothing.
    for (const id of ids) {
      const operation = await store.getOperation(key(id))
      const watch = await store.getWatch(identityOf(id))
      if (failed.includes(id)) {
        expect(operation, id).toMatchObject({ state: "attempted", leaseToken: finalizes.get(id)!.leaseToken })
        expect(operation?.sendMarker, id).not.toBeNull()
        expect(watch, id).toBeNull()
      } else {
        expect(operation, id).toMatchObject({ state: "committed", leaseToken: null })
        expect(watch, id).toMatchObject({ documentID: `doc-${id}`, repairGeneration: 0 })
      }
    }
    expect(await store.getOperation(key("full-new"))).toBeNull()

    await limit(1_000_000)
    for (const id of failed) {
      expect((await store.finalizeOperationAndArmWatch(key(id), finalizes.get(id)!)).outcome, id).toBe("committed")
    }
    expect((await store.claimOperation(claimFor("full-new"))).outcome).toBe("claimed")
  })
})
