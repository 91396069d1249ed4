import { StoreMetrics } from "@connector-store/core"
import { openConnectorStore } from "@connector-store/sql-adapter"
import { Effect, Metric } from "effect"
import { describe, expect, it } from "vitest"
import { claimInput, KEY, NOW, POLICY } from "./operations.fixtures.js"
import { freshPrefix, pgAvailable, pgDatabaseForFile } from "./support/databases.js"

const RUNNERS = 8
const CYCLES = 25

const lostTries = (method: string) =>
  Effect.runSync(Metric.value(Metric.tagged(StoreMetrics.lostRaceRetries, "method", method))).count

/**
 * A hot row: 8 runners cycling one operation key (claim it; the holder
 * reports the device offline, due at once, which frees it for the next
 * claim). Claims and failure reports read the row without a lock and write
 * with one compare-and-set; a try that loses is retried under the row's
 * lock, where it cannot lose again. So no call runs out of its retry budget
 * however hot the row, and each call loses at most one try.
 */
describe.runIf(pgAvailable)("a hot operation key on Postgres", () => {
  it("8 runners cycling one key: no call exhausts its retries, and none loses more than one try", async () => {
    const store = await openConnectorStore({
      url: await pgDatabaseForFile(),
      tablePrefix: freshPrefix(),
      maxConnections: RUNNERS,
      now: () => NOW,
      operationPolicy: POLICY,
      readWinner: () => "w-1"
    })
    try {
      const before = lostTries("claimOperation") + lostTries("recordAttemptFailure")
      let calls = 0
      let held = 0
      await Promise.all(Array.from({ length: RUNNERS }, async () => {
        for (let cycle = 0; cycle < CYCLES; cycle++) {
          calls++
          const claim = await store.claimOperation(claimInput())
          if (claim.outcome !== "claimed") {
            expect(claim.outcome).toBe("busy")
            continue
          }
          held++
          calls++
          const failed = await store.recordAttemptFailure(KEY, { leaseToken: claim.lease.token, kind: "offline", retryAt: NOW })
          expect(failed.outcome).toBe("deferred")
        }
      }))
      const lost = lostTries("claimOperation") + lostTries("recordAttemptFailure") - before
      expect(held).toBeGreaterThan(0)
      expect(lost).toBeLessThanOrEqual(calls)
      const stored = await store.getOperation(KEY)
      expect(stored).toMatchObject({ state: "attempted", attempts: 0, leaseToken: null, deferReason: "offline" })
    } finally {
      await store.close()
    }
  })
})
