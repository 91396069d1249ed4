// Fiber steps, not speed: how many steps of Effect's runtime one call of a
// hot method takes on the Effect API, counted by a scheduler that counts
// every step the runtime takes on the calling fiber (and on any it forks).
// Unlike a rate, the count does not depend on the machine or its load, so it
// shows what a change to the call path saved. On Postgres each step costs a
// few µs of client CPU after every round trip's wait (the process sleeps in
// between, and wakes with cold caches), which is why the count matters there.
// BENCH_TRACED=1 counts each call with a tracer installed (one that keeps
// nothing), for judging what tracing adds.
import { ConnectorStore, WatchRepository } from "@connector-store/core"
import { layer, layerClient } from "@connector-store/sql-adapter"
import { SqlClient } from "@effect/sql/SqlClient"
import { Effect, ManagedRuntime, Scheduler, Tracer } from "effect"
import { removeScratchDatabases, scratchDatabases } from "./support/databases.mjs"
import { claimInputOf, finalizeInputOf, lifecyclePlan, WINNER } from "./support/operation-lifecycle.mjs"
import { FETCHED, MAX_ATTEMPTS, seedRows, watchFleet } from "./support/watch-fleet.mjs"

/** A tracer whose spans go nowhere, but which is not Effect's own: with it installed, calls are traced. */
const quietTracer = Tracer.make({
  span: (name, parent, context, links, startTime, kind) => ({
    _tag: "Span",
    name,
    spanId: "span",
    traceId: "trace",
    parent,
    context,
    status: { _tag: "Started", startTime },
    attributes: new Map(),
    links: [],
    sampled: true,
    kind,
    end: () => undefined,
    attribute: () => undefined,
    event: () => undefined,
    addLinks: () => undefined
  }),
  context: (f) => f()
})

const traced = process.env["BENCH_TRACED"] === "1"

const CALLS = 40
const WARM_UP = 10
let opened = 0

/** Runs effects on `runtime`, counting the runtime steps each one takes. */
const stepCounter = (runtime) => {
  let steps = 0
  const counting = {
    scheduleTask: (task, priority) => Scheduler.defaultScheduler.scheduleTask(task, priority),
    shouldYield: (fiber) => {
      steps++
      return Scheduler.defaultScheduler.shouldYield(fiber)
    }
  }
  return async (effect) => {
    const before = steps
    const value = await runtime.runPromise(Effect.withScheduler(traced ? Effect.withTracer(effect, quietTracer) : effect, counting))
    return { value, steps: steps - before }
  }
}

/** Steps per call of each hot method on the Effect API at `connection`, winners read as `reader` says. */
const stepsOn = async (connection, reader) => {
  const readWinner = reader === "async" ? () => Effect.promise(async () => WINNER) : () => Effect.succeed(WINNER)
  const runtime = ManagedRuntime.make(layer(connection, { readWinner }))
  const client = ManagedRuntime.make(layerClient(connection))
  try {
    const counted = stepCounter(runtime)
    const countedClient = stepCounter(client)
    const fleet = watchFleet({ workers: 1, rowsPerWorker: 1 })
    await runtime.runPromise(Effect.flatMap(WatchRepository, (watches) => Effect.forEach(seedRows(fleet), watches.insert)))
    const plan = lifecyclePlan()
    const totals = new Map()
    const add = (name, steps, counting) => {
      if (counting) totals.set(name, (totals.get(name) ?? 0) + steps)
    }
    const store = (use) => Effect.flatMap(ConnectorStore, use)
    for (let call = 0; call < WARM_UP + CALLS; call++) {
      const counting = call >= WARM_UP
      add("runPromise of Effect.void (the floor)", (await counted(Effect.void)).steps, counting)
      add("an empty transaction on the store's client", (await countedClient(Effect.flatMap(SqlClient, (sql) => sql.withTransaction(Effect.void)))).steps, counting)
      const slot = fleet.next(0)
      const now = Date.now()
      const until = now + 30_000
      const claimed = await counted(store((s) => s.claimWatchAttempt(slot.identity, { until, generation: slot.generation, now })))
      add("claimWatchAttempt", claimed.steps, counting)
      const verified = await counted(store((s) =>
        s.recordVerification(slot.identity, { generation: slot.generation, claimedUntil: until, fetchedDigest: FETCHED, maxAttempts: MAX_ATTEMPTS, dueAt: now + 60_000 })
      ))
      add("recordVerification", verified.steps, counting)
      const armed = await counted(store((s) => s.armWatch(slot.identity, "manual", { dueAt: now })))
      add("armWatch", armed.steps, counting)
      if (claimed.value !== true || verified.value !== "pending" || armed.value !== "opened") {
        throw new Error(`the watch cycle answered ${claimed.value}, ${verified.value}, ${armed.value}`)
      }
      slot.generation++
      const planned = plan.next(0)
      const claim = await counted(store((s) => s.claimOperation(claimInputOf(planned))))
      add("claimOperation", claim.steps, counting)
      const sent = await counted(store((s) => s.markOperationSent(planned.key, { leaseToken: claim.value.lease.token })))
      add("markOperationSent", sent.steps, counting)
      const finalized = await counted(store((s) =>
        s.finalizeOperationAndArmWatch(planned.key, finalizeInputOf(planned, claim.value.lease.token, Date.now()))
      ))
      add("finalizeOperationAndArmWatch", finalized.steps, counting)
      if (claim.value.outcome !== "claimed" || sent.value.outcome !== "sent" || finalized.value.outcome !== "committed") {
        throw new Error(`the lifecycle answered ${claim.value.outcome}, ${sent.value.outcome}, ${finalized.value.outcome}`)
      }
    }
    return new Map([...totals].map(([name, total]) => [name, Math.round(total / CALLS)]))
  } finally {
    await client.dispose()
    await runtime.dispose()
  }
}

const table = async (context) => {
  const columns = [
    ["sqlite, sync reader", await stepsOn({ url: context.sqlite.path("steps-sync.sqlite") }, "sync")],
    ["sqlite, async reader", await stepsOn({ url: context.sqlite.path("steps-async.sqlite") }, "async")]
  ]
  if (context.postgres.skip === undefined) {
    columns.push(["postgres", await stepsOn({ url: context.postgres.url, tablePrefix: `steps${++opened}_`, maxConnections: 4 }, "sync")])
  }
  const names = [...columns[0][1].keys()]
  return [
    `  ${"call (Effect API, one runPromise each)".padEnd(44)}${columns.map(([title]) => title.padStart(22)).join("")}`,
    ...names.map((name) => `  ${name.padEnd(44)}${columns.map(([, steps]) => String(steps.get(name)).padStart(22)).join("")}`),
    ...(context.postgres.skip === undefined ? [] : [`  postgres skipped: ${context.postgres.skip}`])
  ]
}

/** The fiber-steps bench (see bench/README.md for the shape). */
export default {
  title: `runtime steps per call of the hot methods (Effect API${traced ? ", a tracer installed" : ""}), counted, not timed`,
  before: scratchDatabases,
  after: removeScratchDatabases,
  cases: [{ name: "steps per call (after warm-up, averaged)", run: table }]
}
