import { openConnectorStore } from "@connector-store/sql-adapter"
import { realClock } from "./clock.js"
import { startFleet } from "./fleet.js"
import { makePlan } from "./plan.js"
import { digestOf } from "./random.js"
import type { ChildConfig, FromChild, ToChild, WorldMethod } from "./processes.js"
import { SIMULATION_POLICY, WATCH_DELAY_MS } from "./simulation.js"
import type { WorldClient } from "./world.js"

// A child process of a simulation: runners and a due sweeper on a store of
// its own, talking to the main process's world over IPC.

const send = (message: FromChild) => {
  if (process.connected) process.send!(message)
}

let nextCall = 0
const pending = new Map<number, { resolve: (value: unknown) => void; reject: (error: Error) => void }>()
const call = (method: WorldMethod, ...args: ReadonlyArray<unknown>): Promise<never> =>
  new Promise((resolve, reject) => {
    const id = nextCall++
    pending.set(id, { resolve: resolve as (value: unknown) => void, reject })
    send({ t: "call", id, method, args })
  })

const winners = new Map<string, string | null>()

const world: WorldClient = {
  write: (request) => call("write", request),
  read: (entityID) => call("read", entityID),
  readWinner: async (documentID) => winners.get(documentID) ?? null,
  readWinners: async (documentIDs) => Object.fromEntries(documentIDs.map((id) => [id, winners.get(id) ?? null])),
  editLocally: (documentID, content) => {
    winners.set(documentID, digestOf(content))
    return call("editLocally", documentID, content)
  },
  noteWritten: (documentID, entity) => call("noteWritten", documentID, entity),
  knownEtag: (documentID) => call("knownEtag", documentID),
  crashSite: (opIndex) => call("crashSite", opIndex),
  count: (name) => send({ t: "count", name })
}

const start = async (config: ChildConfig) => {
  for (const [id, winner] of Object.entries(config.winners)) winners.set(id, winner)
  const plan = makePlan(config.seed, config.runTag, config.operations)
  const store = await openConnectorStore({
    url: config.database,
    tablePrefix: config.tablePrefix,
    maxConnections: 3,
    prepareStatements: config.prepareStatements,
    readWinner: (documentID) => world.readWinner(documentID),
    readWinners: (documentIDs) => world.readWinners(documentIDs),
    operationPolicy: SIMULATION_POLICY
  })
  const fleet = startFleet({
    store,
    world,
    clock: realClock,
    plan,
    runTag: config.runTag,
    operations: plan.operations.filter((op) => op.document.index % config.processes === config.slot),
    runners: config.runners,
    leaseMs: SIMULATION_POLICY.leaseMs!,
    watchDelayMs: WATCH_DELAY_MS,
    blindResend: config.blindResend,
    onError: (error) => send({ t: "error", message: error instanceof Error ? error.message : String((error as { _tag?: string })?._tag ?? error) })
  })
  send({ t: "ready" })
  return async () => {
    await fleet.stop()
    await store.close()
  }
}

let stop: Promise<() => Promise<void>> | undefined
process.on("message", (message: ToChild) => {
  if (message.t === "start") stop = start(message.config)
  else if (message.t === "winner") winners.set(message.documentID, message.winner)
  else if (message.t === "reply") {
    const waiting = pending.get(message.id)
    pending.delete(message.id)
    if (message.error === undefined) waiting?.resolve(message.value)
    else waiting?.reject(new Error(message.error))
  } else if (message.t === "stop") {
    void (stop ?? Promise.resolve(async () => undefined))
      .then((close) => close())
      .finally(() => process.exit(0))
  }
})
process.on("disconnect", () => process.exit(0))
