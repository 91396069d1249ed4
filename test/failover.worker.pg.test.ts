import { startWorker } from "@connector-store/worker"
import { afterAll, describe, expect, it } from "vitest"
import { editOf, EventLedger } from "./support/failoverLedger.js"
import {
  BEFORE,
  drive,
  DURING,
  IN_FLIGHT,
  ledgerConnector,
  LOOPS,
  open,
  range,
  sendWithoutFinalize
} from "./support/failoverRun.js"
import { cleanup, cutReplication, failoverAvailable, promote, startPrimary, startReplica, waitForReplay } from "./support/pgFailover.js"

// The worker on a promoted replica that forgot acknowledged write-backs: the app hands every edit over again
// (enqueueOperation), as its outbox would after a failover, and the worker drives them.

describe.runIf(failoverAvailable)("the worker after a real Postgres failover (Postgres)", () => {
  afterAll(cleanup)

  it("asynchronous, replayed by the worker: every forgotten edit handed over with enqueueOperation goes out only as its reissue", async () => {
    const primary = await startPrimary()
    const replica = await startReplica(primary, { mode: "async" })
    const ledger = new EventLedger()
    const first = await open(primary.url)
    await drive(first, range(1, BEFORE), ledger)
    await waitForReplay(primary, replica)
    await cutReplication(replica)
    await drive(first, range(BEFORE + 1, BEFORE + DURING), ledger)
    const leasesEnd = await sendWithoutFinalize(first, range(BEFORE + DURING + 1, BEFORE + DURING + IN_FLIGHT), ledger)
    await primary.crash()
    await first.close()
    const promoted = await open(await promote(replica))
    const worker = startWorker(promoted, { connectors: { gcal: ledgerConnector(ledger) }, concurrency: LOOPS, verification: false })
    try {
      while (promoted.now() <= leasesEnd) await new Promise((resolve) => setTimeout(resolve, 50))
      const handedOver = await Promise.all(range(1, BEFORE + DURING + IN_FLIGHT).map((n) => promoted.enqueueOperation(editOf(n))))
      expect(handedOver.filter((answer) => answer.outcome === "enqueued")).toHaveLength(DURING + IN_FLIGHT)
      const deadline = Date.now() + 60_000
      while ((await promoted.getStoreStatus()).operations.attempted > 0) {
        if (Date.now() > deadline) throw new Error("the worker did not drain the replayed edits")
        await new Promise((resolve) => setTimeout(resolve, 100))
      }
      expect(ledger.doubleApplied).toBe(0)
      const status = await promoted.getStoreStatus()
      const unsafe = (DURING + IN_FLIGHT) / 10
      expect(status.operations).toMatchObject({ committed: BEFORE + DURING + IN_FLIGHT - unsafe, reconcile_only: unsafe, dead: 0 })
      expect(status.durability.failover).toMatchObject({ from: { timeline: 1 }, to: { timeline: 2 } })
    } finally {
      await worker.stop()
      await promoted.close()
    }
  }, 120_000)
})
