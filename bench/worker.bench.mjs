// The worker against the hand-written drain loop of docs/runner-loops.md
// ("Many workers draining the due backlog"), on a SQLite file and on
// Postgres, at concurrency 1 and 8, in the same run: a backlog of enqueued
// edits (enqueueOperation, untimed) drained with a no-op provider, each
// drain judged afterwards (every operation committed, each sent once).
// The hand loop's concurrency is that many of its loops on the store, each
// leasing batches of 20 and driving them one at a time, as the page's does.
// Rounds alternate between the two; each side's rate is over all its rounds.
//
//   npm run bench -- worker                  drains of 600 operations per round
//   --worker-ops N (BENCH_WORKER_OPS)        the backlog of a round
//   --worker-rounds N (BENCH_WORKER_ROUNDS)  rounds per side (default 2)
//   --worker-warm N (BENCH_WORKER_WARM)      operations each side drains untimed first (default 200)
import { performance } from "node:perf_hooks"
import { openConnectorStore } from "@connector-store/sql-adapter"
import { startWorker } from "@connector-store/worker"
import { scratchPostgres, scratchSqliteFolder } from "./support/databases.mjs"
import { countOption } from "./support/options.mjs"

const OPS = countOption("worker-ops", "BENCH_WORKER_OPS", 600)
const ROUNDS = countOption("worker-rounds", "BENCH_WORKER_ROUNDS", 2)
const WARM = countOption("worker-warm", "BENCH_WORKER_WARM", 200)

const editOf = (round, n) => ({
  callerDID: "did:bench:app", operationID: `r${round}-edit-${n}`, ownerDID: `did:bench:owner-${n % 16}`, connectorName: "gcal",
  model: "Event", op: "update", accountKey: `account-${n % 16}`, target: "calendars/primary", sourceID: `evt-${n}`,
  deterministicEventID: `local-${n}`, payloadHash: `digest-${n}`, documentID: `doc-${n}`,
  reissueIntent: { kind: "conditional-update", ifMatch: "etag-0" }
})

/** The page's drive and drain, as written there (its `done` a count of sends). */
const drive = async (store, send, claim) => {
  const key = { callerDID: claim.operation.callerDID, operationID: claim.operation.operationID }
  const leaseToken = claim.lease.token
  if ((await store.markOperationSent(key, { leaseToken })).outcome !== "sent") return
  let etag
  try {
    etag = await send(claim)
  } catch (status) {
    const httpStatus = typeof status === "number" ? status : null
    await store.recordAttemptFailure(key, { leaseToken, kind: httpStatus === 429 ? "retryable" : "unknown", httpStatus })
    return
  }
  await store.finalizeOperationAndArmWatch(key, {
    leaseToken, sourceID: claim.operation.sourceID, documentID: claim.operation.documentID, providerEtag: etag,
    watchDueAt: store.now() + 30_000
  })
}
const drain = async (store, send, done) => {
  let mark = 0
  while (!done()) {
    mark = (await store.awaitWork({ since: mark, timeoutMs: 1_000 })).mark
    for (;;) {
      const batch = await store.claimDueOperations({ limit: 20 })
      if (batch.claimed.length === 0) break
      for (const claim of batch.claimed) await drive(store, send, claim)
    }
  }
}

/** One round: a fresh backlog of OPS edits on `store`, drained by `side`; the drain's seconds. */
const round = async (store, side, concurrency, n, ops = OPS) => {
  for (let i = 0; i < ops; i++) await store.enqueueOperation(editOf(n, i))
  const sent = new Map()
  const note = (operationID) => sent.set(operationID, (sent.get(operationID) ?? 0) + 1)
  const started = performance.now()
  if (side === "hand") {
    const send = async (claim) => (note(claim.operation.operationID), "etag-1")
    await Promise.all(Array.from({ length: concurrency }, () => drain(store, send, () => sent.size >= ops)))
  } else {
    let committed = 0
    let finished
    const all = new Promise((resolve) => { finished = resolve })
    const worker = startWorker(store, {
      concurrency,
      verification: false,
      connectors: { gcal: { send: async (operation) => (note(operation.operationID), { id: operation.sourceID, etag: "etag-1" }) } }
    })
    worker.on("write-back", ({ outcome }) => {
      if (outcome === "committed" && ++committed >= ops) finished()
    })
    await all
    await worker.stop()
  }
  const seconds = (performance.now() - started) / 1_000
  if (sent.size !== ops || [...sent.values()].some((times) => times !== 1)) throw new Error(`${side}: ${sent.size} of ${ops} sent, some twice`)
  return seconds
}

const caseOver = (open) => async () => {
  const lines = []
  for (const concurrency of [1, 8]) {
    const store = await open()
    if (store.skip !== undefined) return { skip: store.skip }
    const seconds = { hand: 0, worker: 0 }
    try {
      let n = 0
      // Warm-up, untimed: each side's code runs hot before it is measured.
      for (const side of ["hand", "worker"]) await round(store, side, concurrency, n++, WARM)
      for (let r = 0; r < ROUNDS; r++) {
        for (const side of r % 2 === 0 ? ["hand", "worker"] : ["worker", "hand"]) seconds[side] += await round(store, side, concurrency, n++)
      }
    } finally {
      await store.close()
    }
    const rate = (side) => (ROUNDS * OPS) / seconds[side]
    lines.push(`    concurrency ${concurrency}: worker ${Math.round(rate("worker")).toLocaleString("en-US")}/s, ` +
      `hand loop ${Math.round(rate("hand")).toLocaleString("en-US")}/s, ratio ${(rate("worker") / rate("hand")).toFixed(2)}×`)
  }
  return lines
}

let postgres
let sqlite
export default {
  title: `worker vs the docs' hand-written drain loop, ${OPS} write-backs per round, ${ROUNDS} rounds per side, no-op provider`,
  before: async () => {
    sqlite = scratchSqliteFolder()
    postgres = await scratchPostgres()
  },
  after: async () => {
    sqlite.remove()
    await postgres.drop?.()
  },
  cases: [
    { name: "sqlite file · write-backs/s", run: caseOver(() => openConnectorStore({ url: sqlite.path(`w-${Date.now()}.sqlite`), readWinner: () => "w" })) },
    {
      name: "postgres · write-backs/s",
      run: caseOver(async () =>
        postgres.skip !== undefined ? { skip: postgres.skip, close: async () => {} } : openConnectorStore({ url: postgres.url, tablePrefix: `w${Date.now()}_`, readWinner: () => "w" }))
    }
  ]
}
