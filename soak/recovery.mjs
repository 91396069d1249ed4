// The recovery pass after the load: with every worker stopped and the
// provider calm, wait out the leases, take the "none stuck" snapshot (what
// the due sweep returns against what the table holds), then re-drive every
// due operation and verify every due watch as the docs prescribe, until
// nothing is attempted any more (or the time runs out).
import { openConnectorStore } from "@connector-store/sql-adapter"
import { millisOf } from "./database.mjs"
import { Aborted, claimInputOf, driveOperation, readWinner, readWinners, storeCall, verifyWatch } from "./drive.mjs"

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const keyOf = (callerDID, operationID) => `${callerDID} ${operationID}`

/**
 * Runs the recovery pass. Returns `{ missedBySweep, unsettled, rounds, drives }`:
 * `missedBySweep` the attempted rows with a lapsed lease that were due but the
 * sweep did not return; `unsettled` the rows still attempted at the end.
 */
export const recover = async ({ database, providerUrl, policy, report, ownerDID, connectorName, limitMs = 90_000 }) => {
  const store = await openConnectorStore({ url: database.url, readWinner, readWinners, maxConnections: 3, operationPolicy: policy, providerLimits: true })
  try {
    await sleep(policy.leaseMs + 200)
    const now = Date.now()
    const swept = await storeCall(report, "listDueOperations", () => store.listDueOperations(now, { readWinners }))
    const inSweep = new Set(swept.operations.map((row) => keyOf(row.callerDID, row.operationID)))
    const missedBySweep = (await database.rows())
      .filter((row) => row.state === "attempted")
      .filter((row) => (millisOf(row.lease_expires_at) ?? 0) <= now && (millisOf(row.next_attempt_at) ?? 0) <= now)
      .filter((row) => !inSweep.has(keyOf(row.caller_did, row.operation_id)))
      .map((row) => row.operation_id)

    const ctx = {
      store, report, providerUrl, worker: "recovery", watchDueInMs: 0, offline: () => false, authExpired: () => {}
    }
    const deadline = Date.now() + limitMs
    let rounds = 0
    let drives = 0
    for (;;) {
      rounds++
      await storeCall(report, "resumeOfflineDeferred", () => store.resumeOfflineDeferred(Date.now()))
      await storeCall(report, "resumeAuthDeferred", () =>
        store.resumeAuthDeferred({ ownerDID, connectorNames: [connectorName], now: Date.now() }))
      const due = await storeCall(report, "listDueOperations", () => store.listDueOperations(Date.now(), { readWinners }))
      for (const row of due.operations) {
        drives++
        try {
          report({ type: "drive", how: "recovery", result: await driveOperation(ctx, claimInputOf(row)) })
        } catch (error) {
          if (!(error instanceof Aborted)) throw error
        }
      }
      for (const watch of due.watches) {
        try {
          await verifyWatch(ctx, watch)
        } catch (error) {
          if (!(error instanceof Aborted)) throw error
        }
      }
      const attempted = (await database.rows()).filter((row) => row.state === "attempted")
      if ((attempted.length === 0 && due.watches.length === 0) || Date.now() > deadline) {
        return { missedBySweep, unsettled: attempted.map((row) => row.operation_id), rounds, drives, store }
      }
      if (due.operations.length === 0) await sleep(200)
    }
  } catch (error) {
    await store.close()
    throw error
  }
}
