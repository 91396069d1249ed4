import { ConnectorStore } from "@connector-store/core"
import { openConnectorStore } from "@connector-store/sql-adapter"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { proxiedDatabase } from "./faults.proxy.js"
import { claimFor, faultKey, rejectionOf, sentOperation, sleep, storedRows } from "./faults.support.js"
import { freshPrefix, pgAvailable } from "./support/databases.js"

const CALL_TIMEOUT_MS = 1_500
/** How late past its bound a call may end: timers, a loaded machine. */
const SLACK_MS = 1_500

const key = faultKey

/**
 * The Postgres server restarts under an open store (a proxy that closes
 * every connection and refuses new ones, then lets them through again): a
 * call in flight, and every call made while the server is down, fails typed
 * within its bound and writes nothing; once the server is back every call
 * succeeds, with no reopen.
 */
describe.runIf(pgAvailable)("a Postgres server that restarts under the store", () => {
  const database = proxiedDatabase()

  const open = async (readerStall: { ms: number }) => {
    const { proxy, url } = await database.proxied()
    const prefix = freshPrefix()
    const readWinner = async () => {
      if (readerStall.ms > 0) await sleep(readerStall.ms)
      return "winner-1"
    }
    const store = await openConnectorStore({ url, tablePrefix: prefix, maxConnections: 2, callTimeoutMs: CALL_TIMEOUT_MS, connectTimeoutMs: 1_000, readWinner })
    database.track(store, proxy)
    return { store, proxy, prefix }
  }

  /** What a call that must fail ended with, and how long it took. */
  const failed = async (call: Promise<unknown>) => {
    const started = performance.now()
    const error = await rejectionOf(call)
    return { error, elapsed: performance.now() - started }
  }

  it("fails calls in flight and calls made while it is down, typed and within their bound; every call succeeds once it is back", async () => {
    const stall = { ms: 0 }
    const { store, proxy, prefix } = await open(stall)
    // Both connections of the pool opened and in use once.
    await Promise.all(["warm-1", "warm-2"].map((id) => store.claimOperation(claimFor(id))))
    const { finalize } = await sentOperation(store, "in-flight")

    // A finalize inside its transaction (its winner read stalled) when the server goes down.
    stall.ms = 300
    const inFlight = failed(store.finalizeOperationAndArmWatch(key("in-flight"), finalize))
    await sleep(100)
    proxy.down()
    stall.ms = 0
    const during = [
      await failed(store.claimOperation(claimFor("during-promise"))),
      await failed(store.getOperation(key("warm-1"))),
      await failed(store.runEffect(Effect.flatMap(ConnectorStore, (s) => s.claimOperation(claimFor("during-effect")))))
    ]
    for (const end of [await inFlight, ...during]) {
      expect(end.error, `after ${Math.round(end.elapsed)} ms`).toMatchObject({ _tag: "PersistenceError", reason: "unreachable" })
      expect(end.elapsed).toBeLessThan(CALL_TIMEOUT_MS + SLACK_MS)
    }

    proxy.heal()
    expect((await store.claimOperation(claimFor("after"))).outcome).toBe("claimed")
    expect((await store.finalizeOperationAndArmWatch(key("in-flight"), finalize)).outcome).toBe("committed")
    const effectClaim = await store.runEffect(Effect.flatMap(ConnectorStore, (s) => s.claimOperation(claimFor("after-effect"))))
    expect(effectClaim.outcome).toBe("claimed")

    // Nothing of the failed calls was written; the finalize applied once, whole, after the restart.
    const { operations, watches } = await storedRows(database.direct(), prefix)
    expect(operations.map((row) => row.operation_id).sort()).toEqual(["after", "after-effect", "in-flight", "warm-1", "warm-2"])
    expect(operations.find((row) => row.operation_id === "in-flight")).toMatchObject({ state: "committed", source_id: "src-in-flight" })
    expect(watches.map((row) => row.source_id)).toEqual(["src-in-flight"])
  })
})
