// `npm run soak`: several worker processes (each its own store on one
// database) drive write-back operations against a fake provider while this
// controller SIGKILLs a random worker every 1–3 s and starts another. Then a
// recovery pass and the checks (see checks.mjs). Prints
// `duplicates 0 · lost 0 · stuck 0` or the offending keys; exits 1 on a violation.
//
//   npm run soak -- --backend sqlite|postgres --minutes N | --seconds N --workers W --seed S [--keep] [--min-kills K]
import { appendFileSync } from "node:fs"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { failed, judge, readLines } from "./checks.mjs"
import { createDatabase, scratchFolder } from "./database.mjs"
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

const main = async (options) => {
  const folder = scratchFolder()
  const ledgerPath = folder.path("provider-ledger.jsonl")
  const eventsPath = folder.path("worker-events.jsonl")
  const database = await createDatabase(options.backend, folder)
  const provider = await startProvider({ seed: options.seed, ledgerPath })
  const rng = prng(derive(options.seed, "controller"))
  console.log(`soak · ${options.backend} · ${options.seconds} s · ${options.workers} workers · seed ${options.seed} · files ${folder.dir}`)

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
    while (Date.now() < endsAt) {
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
    await fleet.stopAll()
    stopped = true

    const events = []
    const report = (event) => events.push({ worker: "recovery", t: Date.now(), ...event })
    provider.calm()
    const recovered = await recover({
      database, providerUrl: provider.url, policy: POLICY, report, ownerDID: OWNER, connectorName: CONNECTOR
    })
    const rows = await database.rows()
    const documentIDs = rows.map((row) => row.document_id).filter((id) => id !== null)
    const writeStates = documentIDs.length === 0 ? new Map() : await recovered.store.getDocumentWriteStates(documentIDs)
    await recovered.store.close()
    const ledger = readLines(ledgerPath)
    const allEvents = [...readLines(eventsPath), ...events]
    verdict = judge({
      ledger, events: allEvents, rows, missedBySweep: recovered.missedBySweep, unsettled: recovered.unsettled,
      writeStates, integrity: await database.integrity()
    })
    stats = {
      options, rows, ledger, events: allEvents, kills, spawned: fleet.stats.spawned, selfExits: fleet.stats.selfExits, faults: provider.faults,
      recovery: { rounds: recovered.rounds, drives: recovered.drives }, integrity: await database.integrity()
    }
  } finally {
    if (!stopped) await fleet.stopAll()
    await provider.close()
    await database.drop()
  }
  console.log(formatReport(stats, verdict))
  const tooFewKills = kills < options.minKills
  if (tooFewKills) console.log(`soak: only ${kills} workers were killed, fewer than --min-kills ${options.minKills}`)
  const bad = failed(verdict) || tooFewKills
  if (bad || options.keep) console.log(`the run's files are kept in ${folder.dir}`)
  else folder.remove()
  return bad ? 1 : 0
}

let options
try {
  options = parseArgs(process.argv.slice(2))
} catch (error) {
  console.error(`soak: ${error.message}\nusage: npm run soak -- [--backend sqlite|postgres] [--minutes N | --seconds N] [--workers W] [--seed S] [--keep] [--min-kills K]`)
  process.exit(2)
}
main(options).then((code) => (process.exitCode = code), (error) => {
  console.error(error)
  process.exitCode = 2
})
