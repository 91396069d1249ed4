import { spawn, spawnSync } from "node:child_process"
import { accessSync, appendFileSync, chownSync, constants, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs"
import { createConnection, createServer, type Server, type Socket } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import pg from "pg"

// Real Postgres failovers for tests: a primary and streaming replicas started by
// the test process (initdb, pg_basebackup -R, pg_ctl promote) under a temporary
// folder, as the server's own OS user. Each replica reaches its primary through
// a TCP link in this process, so a test can cut or slow its replication while
// the primary keeps committing.

/** Where the Postgres server programs are (`initdb`, `pg_ctl`, `pg_basebackup`, `postgres`). */
export interface PostgresBinaries {
  readonly bindir: string
  /** The server's major version, e.g. 15. */
  readonly major: number
}

const PROGRAMS = ["initdb", "pg_ctl", "pg_basebackup", "postgres"] as const

const isRoot = typeof process.getuid === "function" && process.getuid() === 0

const hasPrograms = (bindir: string): boolean =>
  PROGRAMS.every((name) => {
    try {
      accessSync(join(bindir, name), constants.X_OK)
      return true
    } catch {
      return false
    }
  })

const majorOf = (bindir: string): number => {
  const out = spawnSync(join(bindir, "postgres"), ["--version"], { encoding: "utf8" })
  const match = /(\d+)(?:\.\d+)?/.exec(out.stdout ?? "")
  return match === null ? Number.NaN : Number(match[1])
}

/** The OS user the servers run as: `postgres` when this process is root, else this process's own user. */
const serverUser = (): { readonly uid: number; readonly gid: number } | undefined => {
  if (!isRoot) return undefined
  const uid = spawnSync("id", ["-u", "postgres"], { encoding: "utf8" })
  const gid = spawnSync("id", ["-g", "postgres"], { encoding: "utf8" })
  if (uid.status !== 0 || gid.status !== 0) return undefined
  return { uid: Number(uid.stdout.trim()), gid: Number(gid.stdout.trim()) }
}

let binaries: PostgresBinaries | undefined | null = null
let unavailableReason = ""

/**
 * The Postgres server programs of this machine: `pg_config --bindir` first, else
 * the newest `/usr/lib/postgresql/<major>/bin`; `undefined` when none has
 * `initdb`, `pg_ctl`, `pg_basebackup` and `postgres`, or when this process is
 * root and there is no `postgres` OS user to run them as (see
 * `failoverUnavailableReason`).
 */
export const postgresBinaries = (): PostgresBinaries | undefined => {
  if (binaries !== null) return binaries
  const candidates: string[] = []
  const config = spawnSync("pg_config", ["--bindir"], { encoding: "utf8" })
  if (config.status === 0 && config.stdout.trim() !== "") candidates.push(config.stdout.trim())
  const root = "/usr/lib/postgresql"
  if (existsSync(root)) {
    const versions = readdirSync(root).filter((name) => /^\d+$/.test(name)).sort((a, b) => Number(b) - Number(a))
    for (const version of versions) candidates.push(join(root, version, "bin"))
  }
  const bindir = candidates.find(hasPrograms)
  if (bindir === undefined) {
    unavailableReason = `no Postgres server programs (${PROGRAMS.join(", ")}) in ${candidates.length === 0 ? "pg_config --bindir or /usr/lib/postgresql/*/bin" : candidates.join(", ")}`
    binaries = undefined
  } else if (isRoot && serverUser() === undefined) {
    unavailableReason = "this process is root and there is no `postgres` OS user to run the servers as"
    binaries = undefined
  } else {
    binaries = { bindir, major: majorOf(bindir) }
  }
  return binaries
}

/** Why `failoverAvailable` is false ("" when it is true). */
export const failoverUnavailableReason = (): string => (postgresBinaries() === undefined ? unavailableReason : "")

/**
 * Whether failover tests can run here. When they cannot, a test file should skip
 * them loudly (`describe.runIf(failoverAvailable)` with "Postgres" in the suite's
 * name, counted by the PostgresSkips reporter); with CONNECTOR_STORE_REQUIRE_PG=1
 * (CI) this module fails to load instead.
 */
export const failoverAvailable: boolean = postgresBinaries() !== undefined
if (!failoverAvailable) {
  if (process.env["CONNECTOR_STORE_REQUIRE_PG"] === "1") {
    throw new Error(`Postgres failover tests are required (CONNECTOR_STORE_REQUIRE_PG=1) but cannot run: ${unavailableReason}`)
  }
  process.stderr.write(`*** Postgres failover tests SKIPPED: ${unavailableReason} ***\n`)
}

const requireBinaries = (): PostgresBinaries => {
  const found = postgresBinaries()
  if (found === undefined) throw new Error(`Postgres failover harness unavailable: ${unavailableReason}`)
  return found
}

interface Ran {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

/** This process's environment without the libpq variables (PGPORT, PGDATA, …) that would redirect a server program. */
const programEnv = (): NodeJS.ProcessEnv => ({
  ...Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith("PG"))),
  LC_ALL: "C"
})

/** Runs one of the server's programs as the server's OS user (`runuser -u postgres` when root). */
const runProgram = (program: string, args: ReadonlyArray<string>, cwd: string, timeoutMs = 60_000): Promise<Ran> => {
  const path = join(requireBinaries().bindir, program)
  const [command, argv] = isRoot ? ["runuser", ["-u", "postgres", "--", path, ...args]] : [path, [...args]]
  return new Promise((resolve, reject) => {
    const child = spawn(command, argv, { cwd, stdio: ["ignore", "pipe", "pipe"], env: programEnv() })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()))
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()))
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs)
    child.on("error", (error) => {
      clearTimeout(timer)
      reject(error)
    })
    child.on("close", (code) => {
      clearTimeout(timer)
      resolve({ code, stdout, stderr })
    })
  })
}

const runOrThrow = async (program: string, args: ReadonlyArray<string>, cwd: string, timeoutMs?: number): Promise<Ran> => {
  const ran = await runProgram(program, args, cwd, timeoutMs)
  if (ran.code !== 0) throw new Error(`${program} ${args.join(" ")} exited ${ran.code}:\n${ran.stderr}${ran.stdout}`)
  return ran
}

/** Runs a server program synchronously (process exit, where nothing asynchronous runs). */
const runProgramSync = (program: string, args: ReadonlyArray<string>, cwd: string): void => {
  const found = postgresBinaries()
  if (found === undefined) return
  const path = join(found.bindir, program)
  const [command, argv] = isRoot ? ["runuser", ["-u", "postgres", "--", path, ...args]] : [path, [...args]]
  spawnSync(command, argv, { cwd, stdio: "ignore", timeout: 30_000, env: programEnv() })
}

/** A port on 127.0.0.1 nothing listens on now (the OS's pick for port 0). */
export const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const probe = createServer()
    probe.once("error", reject)
    probe.listen(0, "127.0.0.1", () => {
      const address = probe.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      probe.close(() => resolve(port))
    })
  })

/** Polls `check` until it returns a value other than `undefined`, or fails naming `what` at the deadline. */
export const pollUntil = async <A>(what: string, check: () => Promise<A | undefined>, timeoutMs = 30_000, everyMs = 50): Promise<A> => {
  const deadline = Date.now() + timeoutMs
  let last: unknown
  for (;;) {
    try {
      const value = await check()
      if (value !== undefined) return value
    } catch (error) {
      last = error
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last === undefined ? "" : `: ${String(last)}`}`)
    }
    await new Promise((done) => setTimeout(done, everyMs))
  }
}

/** Runs one statement on `url` on a connection of its own. */
export const queryOn = async <R extends pg.QueryResultRow = pg.QueryResultRow>(url: string, text: string, values: ReadonlyArray<unknown> = []): Promise<pg.QueryResult<R>> => {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5_000 })
  client.on("error", () => undefined)
  await client.connect()
  try {
    return await client.query<R>(text, [...values])
  } finally {
    await client.end().catch(() => undefined)
  }
}

/**
 * The timeline the server at `url` is on now. Out of recovery, the one it
 * writes WAL on (from `pg_walfile_name(pg_current_wal_lsn())`): a promoted
 * replica's new one from the moment it accepts writes. In recovery, the one
 * its last restartpoint records (`pg_control_checkpoint()`).
 */
export const timelineOf = async (url: string): Promise<number> => {
  const { rows } = await queryOn<{ recovering: boolean; file: string | null; checkpoint: number }>(
    url,
    "SELECT pg_is_in_recovery() AS recovering, CASE WHEN pg_is_in_recovery() THEN NULL ELSE pg_walfile_name(pg_current_wal_lsn()) END AS file, " +
      "(SELECT timeline_id FROM pg_control_checkpoint()) AS checkpoint"
  )
  const row = rows[0]!
  return row.file === null ? Number(row.checkpoint) : Number.parseInt(row.file.slice(0, 8), 16)
}

/**
 * The timeline the server's last checkpoint records (`pg_control_checkpoint()`).
 * After a promotion it still shows the old timeline until the checkpoint that
 * follows the promotion ends (seconds later, while the server already accepts
 * writes); `promote(replica, { checkpointed: true })` waits for it.
 */
export const checkpointTimelineOf = async (url: string): Promise<number> =>
  Number((await queryOn<{ timeline_id: number }>(url, "SELECT timeline_id FROM pg_control_checkpoint()")).rows[0]!.timeline_id)

/** The database system identifier of the server at `url` (the same on a primary and every replica made from it). */
export const systemIdentifierOf = async (url: string): Promise<string> =>
  (await queryOn<{ id: string }>(url, "SELECT system_identifier::text AS id FROM pg_control_system()")).rows[0]!.id

/** A running Postgres server of the harness (a primary, a replica, or a promoted replica). */
export interface PgServer {
  /** `postgres://postgres@127.0.0.1:<port>/postgres` */
  readonly url: string
  readonly port: number
  readonly dataDir: string
  /** A fast shutdown (`pg_ctl stop -m fast`); resolves once the server is down. */
  stop(): Promise<void>
  /** A crash: `pg_ctl stop -m immediate` (no shutdown checkpoint; the next start runs crash recovery). */
  crash(): Promise<void>
  /** Starts the server again after `stop` or `crash`. */
  start(): Promise<void>
}

/**
 * The TCP link a replica reaches its primary through: a proxy in this process
 * that can be cut (the replica receives no more WAL and cannot reconnect) and
 * slowed (every byte, both ways, delayed).
 */
export interface ReplicationLink {
  readonly port: number
  /** Closes every connection through the link and refuses new ones until `heal`. */
  cut(): void
  /** Lets connections through again; the replica reconnects within `wal_retrieve_retry_interval` (100 ms here). */
  heal(): void
  /** Delays every byte through the link by `ms` from now on (0: none): an async replica falls that far behind, a sync one makes each commit wait about twice that. */
  lag(ms: number): void
  readonly isCut: () => boolean
  close(): Promise<void>
}

/** A streaming replica started by `startReplica`. */
export interface PgReplica extends PgServer {
  readonly mode: "async" | "sync"
  /** Its `application_name` in the primary's `pg_stat_replication` and `synchronous_standby_names`. */
  readonly applicationName: string
  readonly primary: PgServer
  readonly link: ReplicationLink
}

const startLink = (target: number): Promise<ReplicationLink> => {
  let isCut = false
  let delayMs = 0
  const sockets = new Set<Socket>()
  /** Forwards `chunk` to `to`, after the link's delay, in order. */
  const forwarder = (to: Socket) => {
    const queue: Array<{ readonly at: number; readonly chunk: Buffer }> = []
    let timer: NodeJS.Timeout | undefined
    const drain = () => {
      timer = undefined
      while (queue.length > 0 && queue[0]!.at <= Date.now()) {
        if (!isCut) to.write(queue.shift()!.chunk)
        else queue.shift()
      }
      if (queue.length > 0) timer = setTimeout(drain, Math.max(0, queue[0]!.at - Date.now()))
    }
    return (chunk: Buffer) => {
      if (isCut) return
      if (delayMs === 0 && queue.length === 0) {
        to.write(chunk)
        return
      }
      queue.push({ at: Date.now() + delayMs, chunk })
      if (timer === undefined) timer = setTimeout(drain, Math.max(0, queue[0]!.at - Date.now()))
    }
  }
  const server: Server = createServer((client) => {
    if (isCut) {
      client.destroy()
      return
    }
    const upstream = createConnection({ host: "127.0.0.1", port: target })
    sockets.add(client)
    sockets.add(upstream)
    const closeBoth = () => {
      client.destroy()
      upstream.destroy()
      sockets.delete(client)
      sockets.delete(upstream)
    }
    for (const socket of [client, upstream]) {
      socket.on("error", closeBoth)
      socket.on("close", closeBoth)
    }
    client.on("data", forwarder(upstream))
    upstream.on("data", forwarder(client))
  })
  return new Promise((resolve, reject) => {
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      resolve({
        port: typeof address === "object" && address !== null ? address.port : 0,
        cut: () => {
          isCut = true
          for (const socket of sockets) socket.destroy()
          sockets.clear()
        },
        heal: () => {
          isCut = false
        },
        lag: (ms) => {
          delayMs = Math.max(0, ms)
        },
        isCut: () => isCut,
        close: () =>
          new Promise<void>((done) => {
            isCut = true
            for (const socket of sockets) socket.destroy()
            server.close(() => done())
          })
      })
    })
  })
}

interface Started {
  readonly dataDir: string
  running: boolean
}

const servers = new Set<Started>()
const links = new Set<ReplicationLink>()
const folders = new Set<string>()

/** Stops every server the harness started (immediately) and removes their folders; synchronous, for process exit. */
const cleanupSync = (): void => {
  for (const server of servers) {
    if (server.running) runProgramSync("pg_ctl", ["stop", "-D", server.dataDir, "-m", "immediate", "-w"], "/")
  }
  servers.clear()
  for (const folder of folders) rmSync(folder, { recursive: true, force: true })
  folders.clear()
}

let exitHooked = false
const hookExit = (): void => {
  if (exitHooked) return
  exitHooked = true
  process.once("exit", cleanupSync)
  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
    process.once(signal, () => {
      cleanupSync()
      // Only this handler was listening: do what the signal would have done without it.
      if (process.listenerCount(signal) === 0) process.kill(process.pid, signal)
    })
  }
}

/**
 * Stops every server the harness started in this process, closes the replication
 * links and removes the folders. Also runs on process exit (and SIGINT, SIGTERM,
 * SIGHUP), so no server outlives the test process unless it is killed with -9.
 */
export const cleanup = async (): Promise<void> => {
  for (const link of links) await link.close()
  links.clear()
  await Promise.all(
    [...servers].filter((server) => server.running).map(async (server) => {
      await runProgram("pg_ctl", ["stop", "-D", server.dataDir, "-m", "immediate", "-w"], "/").catch(() => undefined)
      server.running = false
    })
  )
  servers.clear()
  for (const folder of folders) rmSync(folder, { recursive: true, force: true, maxRetries: 3 })
  folders.clear()
}

const FOLDER = /\/pg-failover-(\d+)-[^/]+\//

const isAlive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM"
  }
}

/**
 * Shuts down (SIGQUIT: an immediate shutdown) the servers that test processes
 * killed with -9 left running, a postmaster whose data folder lies in a
 * `pg-failover-<pid>-…` folder of a process that is gone (Linux only: reads
 * /proc), and removes such folders from the temp folder.
 */
const reapOrphans = (): void => {
  for (const entry of existsSync("/proc/self/cmdline") ? readdirSync("/proc") : []) {
    if (!/^\d+$/.test(entry)) continue
    let args: ReadonlyArray<string>
    try {
      args = readFileSync(`/proc/${entry}/cmdline`, "utf8").split("\0")
    } catch {
      continue
    }
    const dataDir = args[args.indexOf("-D") + 1]
    const owner = args.includes("-D") && dataDir !== undefined ? FOLDER.exec(dataDir) : null
    if (owner === null || !args[0]!.endsWith("postgres")) continue
    const pid = Number(owner[1])
    if (pid === process.pid || isAlive(pid)) continue
    try {
      process.kill(Number(entry), "SIGQUIT")
    } catch {
      // Gone meanwhile.
    }
  }
  for (const name of readdirSync(tmpdir())) {
    const pid = Number(/^pg-failover-(\d+)-/.exec(name)?.[1])
    if (Number.isInteger(pid) && pid !== process.pid && !isAlive(pid)) rmSync(join(tmpdir(), name), { recursive: true, force: true })
  }
}

/** A folder the server's OS user owns, with every parent traversable by it. */
const serverFolder = (dir: string | undefined): string => {
  if (dir === undefined) reapOrphans()
  const folder = dir ?? mkdtempSync(join(tmpdir(), `pg-failover-${process.pid}-`))
  mkdirSync(folder, { recursive: true })
  if (dir === undefined) folders.add(folder)
  const user = serverUser()
  if (user !== undefined) {
    chownSync(folder, user.uid, user.gid)
    // mkdtemp makes 0700 folders (the test run's temp root is one): the server's user must pass through them.
    for (let parent = join(folder, ".."); parent !== "/"; parent = join(parent, "..")) {
      if (spawnSync("runuser", ["-u", "postgres", "--", "test", "-x", parent]).status !== 0) {
        spawnSync("chmod", ["o+x", parent])
      }
    }
  }
  return folder
}

const logTail = (dataDir: string): string => {
  try {
    return readFileSync(`${dataDir}.log`, "utf8").split("\n").slice(-30).join("\n")
  } catch {
    return ""
  }
}

const urlOf = (port: number): string => `postgres://postgres@127.0.0.1:${port}/postgres`

/** A `PgServer` over a data folder whose configuration is written; starting it is `start`. */
const serverAt = (folder: string, dataDir: string, port: number): PgServer => {
  const state: Started = { dataDir, running: false }
  servers.add(state)
  hookExit()
  const logFile = `${dataDir}.log`
  const pgCtl = async (args: ReadonlyArray<string>): Promise<void> => {
    const ran = await runProgram("pg_ctl", args, folder)
    if (ran.code !== 0) throw new Error(`pg_ctl ${args.join(" ")} exited ${ran.code}:\n${ran.stderr}${ran.stdout}\n${logTail(dataDir)}`)
  }
  return {
    url: urlOf(port),
    port,
    dataDir,
    start: async () => {
      await pgCtl(["start", "-w", "-t", "60", "-D", dataDir, "-l", logFile])
      state.running = true
    },
    stop: async () => {
      await pgCtl(["stop", "-w", "-t", "60", "-D", dataDir, "-m", "fast"])
      state.running = false
    },
    crash: async () => {
      await pgCtl(["stop", "-w", "-t", "60", "-D", dataDir, "-m", "immediate"])
      state.running = false
    }
  }
}

const conf = (settings: Record<string, string | number>): string =>
  Object.entries(settings).map(([name, value]) => `${name} = ${typeof value === "number" ? value : `'${value.replace(/'/g, "''")}'`}\n`).join("")

/** Options of `startPrimary`. */
export interface PrimaryOptions {
  /** The folder to make the cluster in (default: a new one under the OS temp folder, removed by `cleanup`). */
  readonly dir?: string
  /** The port to listen on, on 127.0.0.1 (default: a free one). */
  readonly port?: number
}

/**
 * Starts a new Postgres cluster set up to stream to replicas (`wal_level =
 * replica`, trust authentication for user `postgres`, listening on 127.0.0.1
 * only, its socket in its own folder) and waits until it accepts connections.
 */
export const startPrimary = async (options: PrimaryOptions = {}): Promise<PgServer> => {
  const folder = serverFolder(options.dir)
  const dataDir = join(folder, "primary")
  await runOrThrow("initdb", ["-D", dataDir, "-A", "trust", "-U", "postgres", "-E", "UTF8", "--locale=C", "--no-sync"], folder)
  appendFileSync(join(dataDir, "postgresql.conf"), conf({
    listen_addresses: "127.0.0.1",
    unix_socket_directories: folder,
    wal_level: "replica",
    max_wal_senders: 10,
    max_replication_slots: 10,
    wal_keep_size: "256MB",
    hot_standby: "on",
    shared_buffers: "32MB",
    max_connections: 60
  }))
  return startOnPort(folder, dataDir, join(dataDir, "postgresql.conf"), options.port)
}

const PORT_TAKEN = /could not bind|Address already in use|could not create any TCP\/IP sockets/

/**
 * Starts the server of `dataDir` on `port`, or on a free one: when another
 * process took that one between the probe and the start, on another.
 */
const startOnPort = async (folder: string, dataDir: string, confFile: string, port: number | undefined): Promise<PgServer> => {
  for (let attempt = 1; ; attempt++) {
    // A later line of the file wins over an earlier one.
    const chosen = port ?? (await freePort())
    appendFileSync(confFile, conf({ port: chosen }))
    const server = serverAt(folder, dataDir, chosen)
    try {
      await server.start()
      return server
    } catch (error) {
      if (port !== undefined || attempt === 3 || !PORT_TAKEN.test(String(error))) throw error
    }
  }
}

/** Options of `startReplica`. */
export interface ReplicaOptions {
  /**
   * `async`: the primary does not wait for it (the default of most deployments).
   * `sync`: it is the primary's synchronous standby (`synchronous_standby_names`,
   * `synchronous_commit = on`): a commit returns once the replica has flushed it.
   */
  readonly mode: "async" | "sync"
  /** The port to listen on (default: a free one). */
  readonly port?: number
}

let replicas = 0

/**
 * Makes a streaming replica of `primary` (`pg_basebackup -R -X stream`),
 * connected through a `ReplicationLink` of its own, starts it, and waits until
 * the primary's `pg_stat_replication` shows it streaming (and `sync`, for a
 * synchronous one; a primary has at most one). A replica never inherits its primary's
 * `synchronous_standby_names`: promoted, it does not wait for a standby.
 */
export const startReplica = async (primary: PgServer, options: ReplicaOptions): Promise<PgReplica> => {
  if (options.mode === "sync") {
    const { rows } = await queryOn<{ names: string }>(primary.url, "SELECT current_setting('synchronous_standby_names') AS names")
    if (rows[0]!.names.trim() !== "") throw new Error(`${primary.url} already has a synchronous standby (${rows[0]!.names}): one per primary`)
  }
  const folder = join(primary.dataDir, "..")
  const applicationName = `replica${++replicas}_${process.pid}`
  const dataDir = join(folder, applicationName)
  await runOrThrow("pg_basebackup", ["-D", dataDir, "-h", "127.0.0.1", "-p", String(primary.port), "-U", "postgres", "-X", "stream", "-R", "-c", "fast", "--no-sync"], folder)
  const link = await startLink(primary.port)
  links.add(link)
  // Later lines of postgresql.auto.conf win over the ones pg_basebackup -R wrote.
  appendFileSync(join(dataDir, "postgresql.auto.conf"), conf({
    primary_conninfo: `host=127.0.0.1 port=${link.port} user=postgres application_name=${applicationName}`,
    wal_retrieve_retry_interval: "100ms",
    synchronous_standby_names: ""
  }))
  const server = await startOnPort(folder, dataDir, join(dataDir, "postgresql.auto.conf"), options.port)
  if (options.mode === "sync") {
    await queryOn(primary.url, `ALTER SYSTEM SET synchronous_standby_names = '"${applicationName}"'`)
    await queryOn(primary.url, "ALTER SYSTEM SET synchronous_commit = 'on'")
    await queryOn(primary.url, "SELECT pg_reload_conf()")
  }
  await waitForStreaming(primary, applicationName, options.mode)
  return { ...server, mode: options.mode, applicationName, primary, link }
}

const waitForStreaming = (primary: PgServer, applicationName: string, mode: "async" | "sync", timeoutMs = 30_000): Promise<true> =>
  pollUntil(`${applicationName} to stream from ${primary.url}${mode === "sync" ? " as its synchronous standby" : ""}`, async () => {
    const { rows } = await queryOn<{ state: string; sync_state: string }>(
      primary.url,
      "SELECT state, sync_state FROM pg_stat_replication WHERE application_name = $1",
      [applicationName]
    )
    return rows.some((row) => row.state === "streaming" && (mode === "async" || row.sync_state === "sync")) ? true : undefined
  }, timeoutMs)

/** Waits until `replica` has replayed everything `primary` has written so far (its current WAL position). */
export const waitForReplay = async (primary: PgServer, replica: PgServer, timeoutMs = 30_000): Promise<void> => {
  const target = (await queryOn<{ lsn: string }>(primary.url, "SELECT pg_current_wal_lsn()::text AS lsn")).rows[0]!.lsn
  await pollUntil(`${replica.url} to replay ${primary.url} up to ${target}`, async () => {
    const { rows } = await queryOn<{ caught: boolean }>(replica.url, "SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn AS caught", [target])
    return rows[0]!.caught ? true : undefined
  }, timeoutMs)
}

/**
 * Makes `replica` fall behind while its primary goes on committing: its link is
 * cut, so it receives no WAL written from now on (and promoting it cannot
 * replay any). On a synchronous replica this makes every commit on the primary
 * wait until `healReplication`, so it is refused unless `hangCommits` is set.
 */
export const cutReplication = async (replica: PgReplica, options: { readonly hangCommits?: boolean } = {}): Promise<void> => {
  if (replica.mode === "sync" && options.hangCommits !== true) {
    throw new Error(`${replica.applicationName} is a synchronous standby: cutting it makes every commit on the primary wait (pass hangCommits: true to mean it)`)
  }
  replica.link.cut()
  await pollUntil(`${replica.applicationName} to stop receiving WAL`, async () => {
    const { rows } = await queryOn<{ n: number }>(replica.url, "SELECT count(*)::int AS n FROM pg_stat_wal_receiver WHERE status = 'streaming'")
    return rows[0]!.n === 0 ? true : undefined
  })
}

/** Reconnects a cut replica and waits until it streams again (and is `sync` again, for a synchronous one). */
export const healReplication = async (replica: PgReplica): Promise<void> => {
  replica.link.heal()
  await waitForStreaming(replica.primary, replica.applicationName, replica.mode)
}

/** Options of `promote`. */
export interface PromoteOptions {
  /**
   * Also wait until the checkpoint that follows the promotion has ended, so
   * `checkpointTimelineOf` shows the new timeline (seconds more; default false:
   * return as soon as the server accepts writes, as a real failover does).
   */
  readonly checkpointed?: boolean
}

/**
 * Promotes `replica` (`pg_ctl promote -w`) and waits until it is out of
 * recovery and accepts writes. Returns its URL.
 */
export const promote = async (replica: PgReplica, options: PromoteOptions = {}): Promise<string> => {
  const before = await checkpointTimelineOf(replica.url)
  await runOrThrow("pg_ctl", ["promote", "-w", "-t", "60", "-D", replica.dataDir], join(replica.dataDir, ".."))
  await pollUntil(`${replica.url} to accept writes after its promotion`, async () => {
    const { rows } = await queryOn<{ recovering: boolean }>(replica.url, "SELECT pg_is_in_recovery() AS recovering")
    if (rows[0]!.recovering) return undefined
    await queryOn(replica.url, "SELECT txid_current()")
    return true
  })
  if (options.checkpointed === true) {
    await pollUntil(`${replica.url}'s checkpoint to record its new timeline`, async () =>
      (await checkpointTimelineOf(replica.url)) > before ? true : undefined)
  }
  return replica.url
}
