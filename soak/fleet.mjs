// The worker processes of a run. Starting a worker (loading the packages,
// opening its store) can take seconds on a loaded machine, so the fleet keeps
// spare workers already started and waiting: a killed worker is replaced at
// once by a spare ("go"), and a new spare starts in the background.
import { spawn } from "node:child_process"

/**
 * `{ script, configOf(name), workers, spares, log(event) }` → a fleet with
 * `fill()`, `victims(minDrivingMs)`, `kill(name)`, `stopAll()` and `stats`.
 * Only driving workers are victims; a worker that exits by itself is counted
 * and replaced.
 */
export const createFleet = ({ script, configOf, workers, spares, log }) => {
  const children = new Map() // name → { child, readyAt, drivingSince }
  const stats = { spawned: 0, selfExits: 0 }
  let stopping = false

  const driving = () => [...children].filter(([, w]) => w.drivingSince !== undefined)
  const waiting = () => [...children].filter(([, w]) => w.drivingSince === undefined)

  const fill = () => {
    if (stopping) return
    for (const [name, worker] of waiting()) {
      if (driving().length >= workers) break
      if (worker.readyAt === undefined) continue
      worker.drivingSince = Date.now()
      worker.child.send("go")
      log({ type: "go", name })
    }
    while (children.size < workers + spares) spawnOne()
  }

  const spawnOne = () => {
    const name = `w${++stats.spawned}`
    const child = spawn(process.execPath, [script, JSON.stringify(configOf(name))], { stdio: ["ignore", "inherit", "inherit", "ipc"] })
    const worker = { child, readyAt: undefined, drivingSince: undefined }
    children.set(name, worker)
    child.on("message", (message) => {
      if (message !== "ready") return
      worker.readyAt = Date.now()
      fill()
    })
    child.on("exit", (code, signal) => {
      children.delete(name)
      if (stopping || signal === "SIGKILL") return
      stats.selfExits++
      log({ type: "self-exit", name, code, signal })
      fill()
    })
  }

  return {
    stats,
    fill,
    /** How many workers are driving. */
    drivingCount: () => driving().length,
    /**
     * The workers that have been driving for at least `minDrivingMs`, while
     * a started spare is there to take a victim's place or more than half
     * the workers drive (none otherwise: on a loaded machine, where a start
     * takes seconds, kills wait rather than stop the load).
     */
    victims: (minDrivingMs) =>
      !waiting().some(([, w]) => w.readyAt !== undefined) && driving().length <= Math.ceil(workers / 2)
        ? []
        : driving().filter(([, w]) => w.drivingSince <= Date.now() - minDrivingMs).map(([name]) => name),
    /** SIGKILLs `name` and puts a spare in its place. */
    kill: (name) => {
      children.get(name)?.child.kill("SIGKILL")
      children.delete(name)
      fill()
    },
    /** SIGKILLs every worker and spare, and waits until they are gone. */
    stopAll: async () => {
      stopping = true
      const all = [...children.values()].map((w) => w.child)
      const exits = all.filter((child) => child.exitCode === null && child.signalCode === null)
        .map((child) => new Promise((resolve) => child.once("exit", resolve)))
      for (const child of all) child.kill("SIGKILL")
      await Promise.all(exits)
      children.clear()
    }
  }
}
