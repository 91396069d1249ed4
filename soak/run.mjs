// `npm run soak`: several worker processes (each its own store on one
// database) drive write-back operations against a fake provider while this
// controller SIGKILLs a random worker every 1–3 s and starts another. Then a
// recovery pass and the checks (see checks.mjs). Prints
// `duplicates 0 · lost 0 · stuck 0` or the offending keys; exits 1 on a violation.
// With --failover (Postgres) the workers reach the run's own primary through a
// floating address; 40% into the load its replica is cut off (asynchronous only),
// the primary crashed a few seconds later, the replica promoted and the address
// switched to it. Before the recovery pass, every edit whose row the promoted
// server lacks is replayed, as the app would re-enqueue it.
//
//   npm run soak -- --backend sqlite|postgres --minutes N | --seconds N --workers W --seed S [--keep] [--min-kills K]
//     [--failover [--sync]]
import { appendFileSync } from "node:fs"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { openConnectorStore } from "@connector-store/sql-adapter"
import { failed, judge, readLines } from "./checks.mjs"
import { clusterUnavailable, startCluster, timelineOf } from "./cluster.mjs"
import { createDatabase, rowsAt, scratchFolder } from "./database.mjs"
import { Aborted, driveOperation, readWinner, readWinners } from "./drive.mjs"
import { createFleet } from "./fleet.mjs"
import { startProvider } from "./provider.mjs"
import { derive, prng } from "./random.mjs"
import { recover } from "./recovery.mjs"
import { parseArgs } from "./options.mjs"
import { formatReport } from "./report.mjs"

const here = dirname(fileURLToPath(import.meta.url))
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/** The policy every store of the run shares: short leases and delays, so a minute holds many takeovers. */
const POLICY = { leaseMs: 4_000, maxAttempts: 6, backoff: { baseDelayMs: 100, maxDelayMs: 1_000, jitter: "equal" }, deferMs: 1_500 }
/** Workers started ahead and waiting, so a killed worker is replaced at once. */
const SPARES = 3
/** How long a worker drives before it may be killed. */
const MIN_DRIVING_MS = 500
const OWNER = "did:soak:owner"
const CONNECTOR = "soak"
/** Where in the load the failover starts (the replica cut off), and how long the primary commits alone before it crashes. */
const FAILOVER_AT = 0.4
const CUT_LEAD_MS = 3_000

/**
 * The failover, while the load runs: at `at`, the replica's link cut (async),
 * `CUT_LEAD_MS` of load, the primary crashed, the replica promoted, the rows
 * it holds read before the floating address is switched to it. Returns what
 * happened when (epoch ms), the timelines and the promoted server's keys.
 */
const failOver = async (cluster, database, at, log) => {
  const on = (serverUrl) => Object.assign(new URL(serverUrl), { pathname: `/${database.name}` }).toString()
  await sleep(at - Date.now())
  const timelineBefore = await timelineOf(cluster.primaryUrl)
  let cutAt = null
  if (cluster.mode === "async") {
    await cluster.cutReplica()
    cutAt = Date.now()
    log({ type: "failover", step: "replica cut" })
  }
  await sleep(CUT_LEAD_MS)
  const crashAt = Date.now()
  await cluster.crashPrimary()
  log({ type: "failover", step: "primary crashed" })
  await cluster.promoteReplica()
  const promotedAt = Date.now()
  const promotedKeys = new Set((await rowsAt(on(cluster.replicaUrl))).map((row) => row.operation_id))
  cluster.switchToReplica()
  const switchedAt = Date.now()
  log({ type: "failover", step: "address switched to the promoted replica" })
  return { mode: cluster.mode, timelineBefore, timelineAfter: await timelineOf(cluster.replicaUrl), cutAt, crashAt, promotedAt, switchedAt, promotedKeys }
}

/**
 * Replays, through a store on the promoted server, every edit whose row it
 * lacks, as the app re-enqueues a document whose write has no operation:
 * driven once as a worker drives it (claimed in the failover's doubt), left
 * to the recovery pass if unfinished. Returns the replayed keys and what each drive did.
 */
const replayForgotten = async ({ database, providerUrl, edits, report }) => {
  const present = new Set((await database.rows()).map((row) => row.operation_id))
  const queue = [...new Map(edits.map((event) => [event.input.operationID, event.input])).values()].filter((input) => !present.has(input.operationID))
  const store = await openConnectorStore({ url: database.url, readWinner, readWinners, maxConnections: 4, operationPolicy: POLICY, providerLimits: true })
  const ctx = { store, report, providerUrl, worker: "replay", watchDueInMs: 0, offline: () => false, authExpired: () => {} }
  const keys = queue.map((input) => input.operationID)
  const results = []
  try {
    await Promise.all(Array.from({ length: 4 }, async () => {
      for (let input = queue.shift(); input !== undefined; input = queue.shift()) {
        try {
          const result = await driveOperation(ctx, input)
          results.push(result)
          report({ type: "drive", how: "replay", result })
        } catch (error) {
          if (!(error instanceof Aborted)) throw error
          results.push("aborted")
        }
      }
    }))
  } finally {
    await store.close()
  }
  return { keys, results }
}

const main = async (options) => {
  const folder = scratchFolder()
  const ledgerPath = folder.path("provider-ledger.jsonl")
  const eventsPath = folder.path("worker-events.jsonl")
  const cluster = options.failover ? await startCluster(options.sync ? "sync" : "async") : undefined
  const database = await createDatabase(options.backend, folder, cluster?.url)
  const provider = await startProvider({ seed: options.seed, ledgerPath })
  const rng = prng(derive(options.seed, "controller"))
  const mode = cluster === undefined ? "" : ` · failover (${cluster.mode}, servers in ${cluster.dir})`
  console.log(`soak · ${options.backend} · ${options.seconds} s · ${options.workers} workers · seed ${options.seed}${mode} · files ${folder.dir}`)

  const log = (event) => appendFileSync(eventsPath, JSON.stringify({ worker: "controller", t: Date.now(), ...event }) + "\n")
  const fleet = createFleet({
    script: join(here, "worker.mjs"),
    workers: options.workers,
    spares: SPARES,
    log,
    configOf: (worker) => ({
      worker, seed: options.seed, url: database.url, providerUrl: provider.url, eventsPath, policy: POLICY,
      ownerDID: OWNER, connectorName: CONNECTOR
    })
  })
  let kills = 0
  let stopped = false
  let bad = true

  let verdict
  let stats
  try {
    fleet.fill()
    // The load starts once the first workers drive (starting one can take seconds).
    const startBy = Date.now() + 120_000
    while (fleet.drivingCount() < options.workers) {
      if (Date.now() > startBy) throw new Error(`only ${fleet.drivingCount()} of ${options.workers} workers started in 120 s`)
      await sleep(100)
    }
    const endsAt = Date.now() + options.seconds * 1_000
    const failingOver = cluster === undefined
      ? Promise.resolve(undefined)
      : failOver(cluster, database, Date.now() + options.seconds * 1_000 * FAILOVER_AT, log)
    // A failed failover step ends the load at once.
    let failoverError
    failingOver.catch((error) => (failoverError = error))
    while (Date.now() < endsAt && failoverError === undefined) {
      await sleep(Math.min(rng.between(1_000, 3_000), Math.max(0, endsAt - Date.now())))
      // Only a worker that has been driving for a moment is a victim.
      let names = []
      while (Date.now() < endsAt && (names = fleet.victims(MIN_DRIVING_MS)).length === 0) await sleep(100)
      if (names.length === 0) break
      const victim = names[rng.int(names.length)]
      fleet.kill(victim)
      kills++
      log({ type: "kill", victim })
    }
    const failover = await failingOver
    await fleet.stopAll()
    stopped = true

    const events = []
    const report = (event) => events.push({ worker: "recovery", t: Date.now(), ...event })
    provider.calm()
    const replay = failover === undefined ? undefined : await replayForgotten({
      database, providerUrl: provider.url, edits: readLines(eventsPath).filter((event) => event.type === "edit"),
      report: (event) => events.push({ worker: "replay", t: Date.now(), ...event })
    })
    const recovered = await recover({
      database, providerUrl: provider.url, policy: POLICY, report, ownerDID: OWNER, connectorName: CONNECTOR
    })
    const rows = await database.rows()
    const documentIDs = rows.map((row) => row.document_id).filter((id) => id !== null)
    const writeStates = documentIDs.length === 0 ? new Map() : await recovered.store.getDocumentWriteStates(documentIDs)
    const durability = failover === undefined ? undefined : (await recovered.store.getStoreStatus()).durability
    await recovered.store.close()
    const ledger = readLines(ledgerPath)
    const allEvents = [...readLines(eventsPath), ...events]
    const failoverFacts = failover === undefined ? undefined : {
      ...failover, noticed: durability.failover, replayed: replay.keys, replayResults: replay.results,
      // What the promoted server lacked of what the store had acknowledged (a claim answered) or sent before the crash.
      forgotten: [...new Set([
        ...allEvents.filter((event) => event.type === "claim-answer" && event.t < failover.crashAt).map((event) => event.key),
        ...ledger.filter((entry) => entry.t < failover.crashAt).map((entry) => entry.request.key)
      ])].filter((key) => !failover.promotedKeys.has(key)).sort()
    }
    verdict = judge({
      ledger, events: allEvents, rows, missedBySweep: recovered.missedBySweep, unsettled: recovered.unsettled,
      writeStates, integrity: await database.integrity(), failover: failoverFacts
    })
    stats = {
      options, rows, ledger, events: allEvents, kills, spawned: fleet.stats.spawned, selfExits: fleet.stats.selfExits, faults: provider.faults,
      recovery: { rounds: recovered.rounds, drives: recovered.drives }, integrity: await database.integrity(), failover: failoverFacts
    }
    console.log(formatReport(stats, verdict))
    const tooFewKills = kills < options.minKills
    if (tooFewKills) console.log(`soak: only ${kills} workers were killed, fewer than --min-kills ${options.minKills}`)
    bad = failed(verdict) || tooFewKills
  } finally {
    if (!stopped) await fleet.stopAll()
    await provider.close()
    await database.drop()
    await cluster?.close({ keep: bad || options.keep })
  }
  if (bad || options.keep) console.log(`the run's files are kept in ${folder.dir}${cluster === undefined ? "" : ` and ${cluster.dir}`}`)
  else folder.remove()
  return bad ? 1 : 0
}

let options
try {
  options = parseArgs(process.argv.slice(2))
  const unavailable = options.failover ? clusterUnavailable() : undefined
  if (unavailable !== undefined) throw new Error(`--failover cannot run here: ${unavailable}`)
} catch (error) {
  console.error(`soak: ${error.message}\nusage: npm run soak -- [--backend sqlite|postgres] [--minutes N | --seconds N] [--workers W] [--seed S] [--keep] [--min-kills K] [--failover [--sync]]`)
  process.exit(2)
}
main(options).then((code) => (process.exitCode = code), (error) => {
  console.error(error)
  process.exitCode = 2
})
