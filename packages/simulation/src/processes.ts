import { type ChildProcess, fork } from "node:child_process"
import { existsSync } from "node:fs"
import { fileURLToPath } from "node:url"
import type { Fleet } from "./fleet.js"
import { seeded } from "./random.js"
import type { World, WorldClient } from "./world.js"

/** What a child process is told when it starts: enough to rebuild the plan and open its own store. */
export interface ChildConfig {
  readonly database: string
  readonly tablePrefix?: string | undefined
  readonly seed: string
  readonly runTag: string
  readonly operations: number
  /** This child's slot: it issues the edits of documents with `index % processes === slot`. */
  readonly slot: number
  readonly processes: number
  readonly runners: number
  /** Every document's winner when the child starts; changes follow as `winner` messages. */
  readonly winners: Readonly<Record<string, string | null>>
  readonly blindResend?: boolean | undefined
  /** Whether the child's store sends named prepared statements on Postgres (default true). */
  readonly prepareStatements?: boolean | undefined
}

/** The messages between the main process (the world) and a child (runners and their store). */
export type ToChild =
  | { readonly t: "start"; readonly config: ChildConfig }
  | { readonly t: "reply"; readonly id: number; readonly value?: unknown; readonly error?: string }
  | { readonly t: "winner"; readonly documentID: string; readonly winner: string | null }
  | { readonly t: "stop" }

/** What a child sends: a call on the world, a counted event, an error, or that it started. */
export type FromChild =
  | { readonly t: "call"; readonly id: number; readonly method: WorldMethod; readonly args: ReadonlyArray<unknown> }
  | { readonly t: "count"; readonly name: string }
  | { readonly t: "error"; readonly message: string }
  | { readonly t: "ready" }

/** The world's methods a child may call. */
export type WorldMethod = Exclude<keyof WorldClient, "count">

const WORLD_METHODS: ReadonlySet<string> = new Set<WorldMethod>([
  "write",
  "read",
  "readWinner",
  "readWinners",
  "editLocally",
  "noteWritten",
  "knownEtag",
  "crashSite"
])

/** The child's entry: `child.js` beside this module once built, or the built one when running from source. */
const childEntry = (): string => {
  const beside = fileURLToPath(new URL("./child.js", import.meta.url))
  return existsSync(beside) ? beside : fileURLToPath(new URL("../dist/child.js", import.meta.url))
}

/** How the main process runs children. */
export interface ProcessFleetOptions extends Omit<ChildConfig, "slot" | "winners"> {
  readonly world: World
  /** Kill children at random moments (from the seed) and start them again. */
  readonly crashes: boolean
  readonly onError: (error: unknown) => void
}


/**
 * Runs the runners in `processes` child processes, each with its own store
 * on the same database, all talking to the one world of this process over
 * IPC. With crashes, a working child is killed (SIGKILL) every 0.4–1.2 s and started
 * again: its replacement re-issues every edit of its slot (claims converge on
 * the stored rows), and the due sweep of any process re-drives what the
 * killed one left leased.
 */
export const startProcessFleet = (options: ProcessFleetOptions): Fleet => {
  const { world } = options
  const entry = childEntry()
  const children = new Map<number, ChildProcess>()
  const ready = new Set<ChildProcess>()
  const exited = new Map<number, Promise<void>>()
  let stopping = false

  const spawn = (slot: number) => {
    const child = fork(entry, [], { stdio: ["ignore", "inherit", "inherit", "ipc"] })
    const { world: _world, crashes: _crashes, onError: _onError, ...config } = options
    child.send({ t: "start", config: { ...config, slot, winners: world.winners() } } satisfies ToChild)
    // A send to a child that is being killed fails with EPIPE: that child is gone, nothing else is.
    child.on("error", () => world.count("process.send-failed"))
    child.on("message", (message: FromChild) => {
      if (message.t === "count") return world.count(message.name)
      if (message.t === "ready") return void ready.add(child)
      if (message.t === "error") return options.onError(new Error(`child ${slot}: ${message.message}`))
      if (!WORLD_METHODS.has(message.method)) return
      const method = world[message.method] as (...args: ReadonlyArray<unknown>) => Promise<unknown>
      method.apply(world, [...message.args]).then(
        (value) => child.connected && child.send({ t: "reply", id: message.id, value } satisfies ToChild),
        (error: unknown) => child.connected && child.send({ t: "reply", id: message.id, error: String(error) } satisfies ToChild)
      )
    })
    exited.set(slot, new Promise((resolve) => child.on("exit", () => {
      if (children.get(slot) === child) children.delete(slot)
      ready.delete(child)
      resolve()
      if (!stopping) spawn(slot)
    })))
    children.set(slot, child)
  }
  // Children read winners from a replica kept current by these messages, never over IPC inside a
  // transaction: on SQLite the main process waits for the write lock synchronously, so a child that
  // held the lock while waiting for the main process's answer would stall both.
  world.onWinnerChange((documentID, winner) => {
    for (const child of children.values()) {
      if (child.connected) child.send({ t: "winner", documentID, winner } satisfies ToChild)
    }
  })
  for (let slot = 0; slot < options.processes; slot++) spawn(slot)

  // The killer's pause ends early when the fleet stops, so no timer of it outlives the run.
  let pause: { readonly timer: ReturnType<typeof setTimeout>; readonly resolve: () => void } | undefined
  const sleep = (ms: number) => new Promise<void>((resolve) => {
    pause = { timer: setTimeout(resolve, ms), resolve }
  })
  const stopKilling = () => {
    if (pause === undefined) return
    clearTimeout(pause.timer)
    pause.resolve()
  }
  void (async () => {
    if (!options.crashes) return
    let kills = 0
    for (let tick = 0; kills < options.processes * 3 && !stopping; tick++) {
      const draw = seeded(options.seed, "kill", tick)
      await sleep(draw.int(400, 1_200))
      const child = children.get(draw.int(0, options.processes - 1))
      // Only a child that is at work is killed: one still starting up would never get anything done.
      if (stopping || child === undefined || !ready.has(child)) continue
      child.kill("SIGKILL")
      kills++
      world.count("process.killed")
    }
  })()

  return {
    stop: async () => {
      stopping = true
      for (const child of children.values()) if (child.connected) child.send({ t: "stop" } satisfies ToChild)
      const all = Promise.all([...exited.values()])
      // A child that does not stop within 15 s is killed; the timer goes once all have exited, so nothing outlives the run.
      const timer = setTimeout(() => {
        for (const child of children.values()) child.kill("SIGKILL")
      }, 15_000)
      try {
        await all
      } finally {
        clearTimeout(timer)
        stopKilling()
      }
    }
  }
}
