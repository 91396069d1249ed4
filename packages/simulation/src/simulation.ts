import { randomBytes } from "node:crypto"
import { OperationEntropy, type OperationPolicyOverrides, type PromiseConnectorStore } from "@connector-store/core"
import { Layer, Random } from "effect"
import { isPostgresUrl, openConnectorStore } from "@connector-store/sql-adapter"
import { makeVirtualClock, realClock, type SimClock } from "./clock.js"
import { type Fleet, startFleet } from "./fleet.js"
import { makePlan, type SimulationPlan } from "./plan.js"
import { startProcessFleet } from "./processes.js"
import { makeProgress, type ProgressMode } from "./progress.js"
import { relistSweep, type RelistSummary } from "./relistSweep.js"
import { buildReport, operationsOf, type SimulationReport } from "./report.js"
import { abandonedAuthorization, editElsewhere, makeAuthMonitor, makeConnectivityMonitor, syncOnce } from "./upkeep.js"
import { seeded, seededToken } from "./random.js"
import { verifyDueWatches } from "./verifier.js"
import { CRASH_SITES, World } from "./world.js"

/** What `runSimulation` takes; everything but the database has a default. */
export interface SimulationOptions {
  /** A SQLite file path or a `postgres://` URL. */
  readonly database: string
  /**
   * Same seed, same report (ids included) on one backend and runner count,
   * without `processes` (default: a random one, reported). A second run of
   * a seed on a database that holds the first is refused.
   */
  readonly seed?: string | number | undefined
  /** Write-backs to run (default 120). */
  readonly operations?: number | undefined
  /** Concurrent runners (default 4); with `processes`, spread over the child processes. */
  readonly runners?: number | undefined
  /** The longest the write-back phase may take before the run winds down, in the run's time (default 60 s; see `SimClock`). */
  readonly durationMs?: number | undefined
  /** Child processes running the runners, each with its own store (default 0: all in this process). */
  readonly processes?: number | undefined
  /** Inject crashes at every step of the write-back, and kill child processes (default true). */
  readonly crashes?: boolean | undefined
  /** Provider faults, offline periods and grant expiry (default true). */
  readonly faults?: boolean | undefined
  /** The store's table prefix (default the seed's). */
  readonly tablePrefix?: string | undefined
  /** How progress is shown (default none). */
  readonly progress?: ProgressMode | undefined
  /**
   * Runners ignore `claim.reissue` and re-send the plain write after a request
   * may have landed: a deliberately broken runner, to see the invariant check fail.
   */
  readonly blindResend?: boolean | undefined
  /** Whether the run's stores send named prepared statements on Postgres (default true; see `SqlConnection.prepareStatements`). */
  readonly prepareStatements?: boolean | undefined
  /** Where progress goes (default stderr). */
  readonly write?: ((text: string) => void) | undefined
}

/**
 * The operation policy of every store of a run: short leases so that
 * takeovers happen within the run, a handful of attempts, quick backoff.
 * Every provider request finishes well inside a lease.
 */
export const SIMULATION_POLICY: OperationPolicyOverrides = {
  leaseMs: 600,
  maxAttempts: 6,
  backoff: { baseDelayMs: 20, maxDelayMs: 250, jitter: "equal" },
  deferMs: 10_000
}

/** How long after a commit a watch's first verification falls due. */
export const WATCH_DELAY_MS = 30


/** A readable name of the database (a Postgres URL without its credentials). */
export const describeDatabase = (url: string): string => {
  if (!isPostgresUrl(url)) return `SQLite ${url}`
  const parsed = new URL(url)
  return `Postgres ${parsed.hostname}:${parsed.port || "5432"}${parsed.pathname}`
}

const checkCount = (name: string, value: number, min: number, max: number) => {
  if (!Number.isSafeInteger(value) || value < min || value > max) {
    throw new RangeError(`${name} must be an integer from ${min} to ${max} (got ${value})`)
  }
}

/**
 * Runs a connector simulation against a real store and reports what
 * happened. Runners drive write-backs through claim → mark sent → provider
 * call → finalize-and-arm (or the failure the answer means) while a fake
 * provider fails, rate-limits, times out after applying, goes offline and
 * lets its grant expire, and crashes are injected at every step; a verifier,
 * a sync with its lease and checkpoints, resumes on reconnect and re-auth,
 * pending OAuth, a relist sweep with provider-side deletions and retention
 * run beside them. The report's invariant checks say whether any write was
 * applied twice without a sanctioned reissue, any committed write went
 * unwatched, or any deletion came from an incomplete relist (`ok: false`).
 * Rejects with a `RangeError` naming a bad option, before touching the database.
 */
export const runSimulation = async (options: SimulationOptions): Promise<SimulationReport> => {
  const operations = options.operations ?? 120
  const runners = options.runners ?? 4
  const processes = options.processes ?? 0
  const durationMs = options.durationMs ?? 60_000
  checkCount("operations", operations, 1, 100_000)
  checkCount("runners", runners, 1, 64)
  checkCount("processes", processes, 0, 16)
  checkCount("duration", durationMs, 100, 86_400_000)
  if (typeof options.database !== "string" || options.database.length === 0) throw new RangeError("database must be a SQLite path or a postgres:// URL")
  const seed = String(options.seed ?? randomBytes(4).readUInt32BE(0))
  const crashes = options.crashes ?? true
  const write = options.write ?? ((text: string) => void process.stderr.write(text))
  const runTag = runTagOf(seed)
  const plan = makePlan(seed, runTag, operations)
  // Child processes keep the machine's clock: a virtual one cannot be shared over IPC.
  const clock: SimClock = processes > 0 ? realClock : makeVirtualClock()
  return clock.spawn(() => simulate({ ...options, seed, operations, runners, processes, durationMs, crashes, write }, runTag, plan, clock))
}

/**
 * The store's random draws from the seed: Effect's `Random` (the backoff's
 * jitter) and `OperationEntropy` (node keys, incarnations, lease tokens,
 * relist run ids), given to the store's runtime as the layer it is
 * provided with. Ids stay unique on a shared database: the run's tag is
 * part of their seed, and a second run of one seed is refused.
 */
export const seededRandomness = (seed: string, runTag: string): Layer.Layer<OperationEntropy> => {
  const draw = seeded(seed, "store-entropy", runTag)
  const token = () => {
    const hex = seededToken(draw, 32)
    return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-4${hex.slice(13, 16)}-a${hex.slice(17, 20)}-${hex.slice(20)}`
  }
  return Layer.merge(Layer.succeed(OperationEntropy, { token }), Layer.setRandom(Random.make(`${seed}/${runTag}`)))
}

/** The run's tag, which every id of the run carries: from the seed, so a run repeats. */
export const runTagOf = (seed: string): string => seeded(seed, "run-tag").int(0, 0xffff_ffff).toString(16).padStart(8, "0")

interface Settled extends SimulationOptions {
  readonly seed: string
  readonly operations: number
  readonly runners: number
  readonly processes: number
  readonly durationMs: number
  readonly crashes: boolean
  readonly write: (text: string) => void
}

const simulate = async (options: Settled, runTag: string, plan: SimulationPlan, clock: SimClock): Promise<SimulationReport> => {
  const { seed, operations, runners, processes, durationMs, crashes, write } = options
  const sleep = clock.sleep
  const progress = makeProgress(options.progress ?? "none", write)
  const world = new World(seed, plan, { crashes, faults: options.faults ?? true, clock })
  const started = clock.now()
  const errors: Array<unknown> = []
  const onError = (error: unknown) => {
    world.count(`error.${(error as { _tag?: string })?._tag ?? "other"}`)
    if (errors.length < 5) errors.push(error)
  }

  const store: PromiseConnectorStore<unknown> = await openConnectorStore({
    url: options.database,
    tablePrefix: options.tablePrefix,
    maxConnections: 4,
    prepareStatements: options.prepareStatements,
    now: clock.now,
    observability: seededRandomness(seed, runTag),
    readWinner: (documentID) => world.readWinner(documentID),
    readWinners: (documentIDs) => world.readWinners(documentIDs),
    operationPolicy: SIMULATION_POLICY
  })
  try {
    const first = plan.operations[0]!
    if (await store.getOperation({ callerDID: first.callerDID, operationID: first.operationID }) !== null) {
      throw new RangeError(`the database already holds the run of seed ${seed} (its ids would meet): use another seed or database`)
    }
    let phase = "write-back"
    let settled = { stored: 0, final: 0, committed: 0 }
    let watchCounts = { verified: 0, watches: 0 }
    const loops: Array<{ stop: () => Promise<void> }> = []
    const every = (ms: number, step: (tick: number) => Promise<unknown>) => {
      let stopping = false
      const done = clock.spawn(async () => {
        for (let tick = 0; !stopping; tick++) {
          await step(tick).catch(onError)
          await sleep(ms)
        }
      })
      const loop = { stop: async () => { stopping = true; await clock.join(done) } }
      loops.push(loop)
      return loop
    }
    const show = () =>
      progress.update({
        elapsedMs: clock.now() - started,
        phase,
        planned: operations,
        ...settled,
        requests: world.provider.ledger.length,
        applied: world.provider.ledger.filter((e) => e.applied).length,
        crashes: CRASH_SITES.reduce((sum, site) => sum + (world.counters.get(`crash.${site}`) ?? 0), 0) +
          (world.counters.get("process.killed") ?? 0),
        ...watchCounts,
        offline: world.isOffline(),
        grantExpired: world.isGrantExpired()
      })
    const survey = async () => {
      const rows = await operationsOf(store, plan.scope.ownerDID)
      settled = {
        stored: rows.length,
        final: rows.filter((r) => r.state !== "attempted").length,
        committed: rows.filter((r) => r.state === "committed").length
      }
      const watches = await store.listWatchesByDocuments(plan.documents.map((d) => d.documentID))
      watchCounts = { verified: watches.filter((w) => w.verificationStatus === "verified").length, watches: watches.length }
      return watches
    }

    await abandonedAuthorization(store, world, plan.scope)
    const fleet: Fleet = processes > 0
      ? startProcessFleet({
        database: options.database,
        tablePrefix: options.tablePrefix,
        seed,
        runTag,
        operations,
        processes,
        runners: Math.max(1, Math.ceil(runners / processes)),
        world,
        crashes,
        blindResend: options.blindResend,
        prepareStatements: options.prepareStatements,
        onError
      })
      : startFleet({
        store,
        world,
        plan,
        runTag,
        operations: plan.operations,
        runners,
        clock,
        leaseMs: SIMULATION_POLICY.leaseMs!,
        watchDelayMs: WATCH_DELAY_MS,
        blindResend: options.blindResend,
        onError
      })
    const verifier = every(25, () => verifyDueWatches(store, world, plan.scope.ownerDID))
    const connectivity = makeConnectivityMonitor(store, world)
    const auth = makeAuthMonitor(store, world, plan.scope)
    every(30, connectivity)
    every(30, auth)
    every(300, () => syncOnce(store, world, plan.scope, "sync-a"))
    every(370, () => syncOnce(store, world, plan.scope, "sync-b"))
    every(150, (tick) => editElsewhere(store, world, tick))
    every(100, async () => show())

    const deadline = started + durationMs
    let finished = false
    while (clock.now() < deadline) {
      await survey()
      if (settled.stored === operations && settled.final === operations) {
        finished = true
        break
      }
      await sleep(150)
    }
    phase = "winding down"
    await fleet.stop()
    for (const loop of loops.splice(0).filter((l) => l !== verifier)) await loop.stop()
    loops.push(verifier)
    world.calm()
    await auth()
    await connectivity()

    const settleWatches = async (ms: number) => {
      const until = clock.now() + ms
      while (clock.now() < until) {
        const watches = await survey()
        if (watches.every((w) => w.verificationStatus !== "pending_verification")) return
        await sleep(50)
      }
    }
    phase = "verifying"
    await settleWatches(4_000)
    let relist: RelistSummary | null = null
    if (finished) {
      phase = "relist sweep"
      relist = await relistSweep(store, world)
      phase = "verifying"
      await settleWatches(2_000)
    }
    await verifier.stop()
    phase = "retention"
    const collected = finished ? await store.collectFinishedOperations({ before: clock.now() + 1, limit: 1_000 }) : 0
    await survey()
    show()
    progress.done()
    return await buildReport(store, world, {
      seed,
      database: describeDatabase(options.database),
      runners,
      processes,
      elapsedMs: clock.now() - started,
      finished,
      collected,
      relist,
      errors: errors.map((e) => (e instanceof Error ? `${e.name}: ${e.message}` : String((e as { _tag?: string })?._tag ?? e)))
    })
  } finally {
    await store.close()
  }
}
