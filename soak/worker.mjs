// A soak worker: its own OS process and its own store on the shared
// database. It draws new keys and re-drives due ones (the sweep), verifies
// due watches, and goes offline now and then, until the controller kills it.
// Everything the checks need is appended to files before and after each
// store call (claim intents and answers, violations, typed errors, faults),
// so a SIGKILL loses nothing that was observed.
import { appendFileSync } from "node:fs"
import { openConnectorStore } from "@connector-store/sql-adapter"
import { Aborted, claimInputOf, driveDueBatch, driveOperation, readWinner, readWinners, send, storeCall, verifyWatch } from "./drive.mjs"
import { derive, prng } from "./random.mjs"

const config = JSON.parse(process.argv[2])
const rng = prng(derive(config.seed, `worker-${config.worker}`))
const report = (event) => appendFileSync(config.eventsPath, JSON.stringify({ worker: config.worker, t: Date.now(), ...event }) + "\n")

process.on("unhandledRejection", (error) => {
  report({ type: "violation", what: "untyped", method: "unhandled", text: String(error?.stack ?? error).slice(0, 300) })
  process.exit(70)
})

// Opening (and migrating) under contention is judged like any other call.
const store = await storeCall(report, "openConnectorStore", () =>
  openConnectorStore({ url: config.url, readWinner, readWinners, maxConnections: 3, operationPolicy: config.policy, providerLimits: true })
).catch(() => process.exit(71))
// Every store of the run enforces provider limits: a 429 pauses its account for all, and one account is capped.
await storeCall(report, "setProviderLimit", () =>
  store.setProviderLimit({ connectorName: config.connectorName, accountKey: "acct-0", maxInFlight: 2 })
).catch(() => process.exit(71))

let offlineUntil = 0
let authPending = false
const ctx = {
  store, report, providerUrl: config.providerUrl, worker: config.worker, watchDueInMs: 400,
  offline: () => {
    if (Date.now() < offlineUntil) return true
    if (!rng.chance(0.01)) return false
    offlineUntil = Date.now() + rng.between(300, 1_500)
    report({ type: "fault", what: "offline" })
    return true
  },
  authExpired: () => void (authPending = true)
}

let serial = 0
/** A new key: an update or a delete of an entity seeded at the provider, a deterministic create, or a create that can only be reconciled. */
const newKey = async () => {
  const operationID = `k-${config.seed}-${config.worker}-${++serial}`
  const documentID = `doc-${operationID}`
  const common = {
    callerDID: "did:soak:caller", operationID, ownerDID: config.ownerDID, connectorName: config.connectorName,
    model: "event", accountKey: `acct-${rng.int(12)}`, target: "calendar-1", deterministicEventID: `evt-${operationID}`,
    payloadHash: `hash-${operationID}`, documentID
  }
  const kind = rng.next()
  if (kind < 0.55) {
    const entityID = `ent-${operationID}`
    const seeded = await send(config.providerUrl, "/seed", { entityID, documentID: `seed-${operationID}` }, 5_000)
    if (seeded.status !== 200) return null
    // One seeded entity in four is deleted (the user removed the document), the others updated.
    if (kind < 0.14) return { ...common, op: "delete", sourceID: entityID, providerEtag: null, reissueIntent: { kind: "idempotent-delete" } }
    return { ...common, op: "update", sourceID: entityID, providerEtag: seeded.body.etag,
      reissueIntent: { kind: "conditional-update", ifMatch: seeded.body.etag } }
  }
  if (kind < 0.75) return { ...common, op: "create", reissueIntent: { kind: "deterministic-create", providerID: `pid-${operationID}` } }
  return { ...common, op: "create", reissueIntent: { kind: "reconcile" } }
}

let lastSweep = 0
const tick = async () => {
  const now = Date.now()
  if (now >= offlineUntil && offlineUntil !== 0) {
    offlineUntil = 0
    await storeCall(report, "resumeOfflineDeferred", () => store.resumeOfflineDeferred(Date.now()))
  }
  if (authPending && rng.chance(0.2)) {
    authPending = false
    await storeCall(report, "resumeAuthDeferred", () =>
      store.resumeAuthDeferred({ ownerDID: config.ownerDID, connectorNames: [config.connectorName], now: Date.now() }))
  }
  if (now - lastSweep >= 500) {
    lastSweep = now
    // Half the sweeps re-drive through a batch lease, half by claiming what the sweep listed, so both meet.
    if (rng.chance(0.5)) {
      for (const result of await driveDueBatch(ctx, 3)) report({ type: "drive", how: "batch", result })
    }
    const due = await storeCall(report, "listDueOperations", () => store.listDueOperations(Date.now(), { readWinners }))
    for (const row of due.operations.slice(0, 3)) {
      const sending = rng.chance(0.5)
      const input = sending ? { ...claimInputOf(row), markSent: true } : claimInputOf(row)
      report({ type: "drive", how: sending ? "redrive (marked at claim)" : "redrive", result: await driveOperation(ctx, input) })
    }
    for (const watch of due.watches.slice(0, 2)) report({ type: "drive", how: "watch", result: await verifyWatch(ctx, watch) })
    return
  }
  const input = await newKey()
  if (input === null) return
  // The edit itself, so the failover soak can replay the ones the promoted server forgot, as the app would.
  report({ type: "edit", input })
  // Half the claims mark their request sent themselves (claimOperation({ markSent: true })): a kill between
  // such a claim and its request leaves the operation in doubt, to be re-sent only as its reissue says.
  const sending = rng.chance(0.5)
  report({ type: "drive", how: sending ? "new (marked at claim)" : "new", result: await driveOperation(ctx, sending ? { ...input, markSent: true } : input) })
}

// A spare until the controller says go; gone with the controller.
process.on("disconnect", () => process.exit(0))
process.send?.("ready")
if (process.send !== undefined) await new Promise((resolve) => process.once("message", resolve))
report({ type: "started", pid: process.pid })
// What the runners' waits have seen: a wait from it ends at once when a commit came since.
let mark = 0
const loop = async () => {
  for (;;) {
    try {
      await tick()
      // Now and then a runner waits for a commit instead of sleeping, as an idle worker of a fleet does.
      if (rng.chance(0.1)) mark = (await storeCall(report, "awaitWork", () => store.awaitWork({ since: mark, timeoutMs: 1 + rng.int(30) }))).mark
      else await new Promise((resolve) => setTimeout(resolve, rng.int(20)))
    } catch (error) {
      if (!(error instanceof Aborted)) throw error
    }
  }
}
// Three runners per process: more interleavings per start (a start costs about a second of CPU).
await Promise.all([loop(), loop(), loop()])
