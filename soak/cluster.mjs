// The failover soak's own Postgres pair: a primary and a streaming replica
// (asynchronous, or its synchronous standby) made in a temp folder with
// initdb and pg_basebackup -R, run as the server's OS user (`postgres` when
// this process is root). The replica streams through a link in this process
// that can be cut; the workers reach the primary through a floating address
// (a TCP proxy here) that is switched to the replica once it is promoted.
// A plain-JS cut-down of test/support/pgFailover.ts, which the tests use.
import { spawn, spawnSync } from "node:child_process"
import { accessSync, appendFileSync, chownSync, constants, existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs"
import { createConnection, createServer } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import pg from "pg"

const PROGRAMS = ["initdb", "pg_ctl", "pg_basebackup", "postgres"]
const isRoot = process.getuid?.() === 0

/** The server programs' folder: `pg_config --bindir`, else the newest /usr/lib/postgresql/<major>/bin; undefined when none has them all. */
const bindir = () => {
  const candidates = []
  const config = spawnSync("pg_config", ["--bindir"], { encoding: "utf8" })
  if (config.status === 0 && config.stdout.trim() !== "") candidates.push(config.stdout.trim())
  const root = "/usr/lib/postgresql"
  if (existsSync(root)) {
    for (const major of readdirSync(root).filter((name) => /^\d+$/.test(name)).sort((a, b) => b - a)) candidates.push(join(root, major, "bin"))
  }
  return candidates.find((dir) => PROGRAMS.every((name) => {
    try {
      accessSync(join(dir, name), constants.X_OK)
      return true
    } catch {
      return false
    }
  }))
}

/** Runs a server program as the server's OS user, its output collected; libpq's PG* variables kept from it. */
const run = (bin, program, args, cwd) => {
  const path = join(bin, program)
  const [command, argv] = isRoot ? ["runuser", ["-u", "postgres", "--", path, ...args]] : [path, args]
  const env = { ...Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith("PG"))), LC_ALL: "C" }
  return new Promise((resolve, reject) => {
    const child = spawn(command, argv, { cwd, stdio: ["ignore", "pipe", "pipe"], env })
    let out = ""
    child.stdout.on("data", (chunk) => (out += chunk))
    child.stderr.on("data", (chunk) => (out += chunk))
    child.on("error", reject)
    child.on("close", (code) => code === 0 ? resolve(out) : reject(new Error(`${program} ${args.join(" ")} exited ${code}:\n${out}`)))
  })
}

const freePort = () => new Promise((resolve, reject) => {
  const probe = createServer()
  probe.once("error", reject)
  probe.listen(0, "127.0.0.1", () => {
    const { port } = probe.address()
    probe.close(() => resolve(port))
  })
})

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/** Runs one statement on `url` on a connection of its own. */
export const queryOn = async (url, text, values = []) => {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5_000 })
  client.on("error", () => {})
  await client.connect()
  try {
    return (await client.query(text, values)).rows
  } finally {
    await client.end().catch(() => {})
  }
}

const until = async (what, check, timeoutMs = 30_000) => {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    if (await check().catch(() => false)) return
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await sleep(50)
  }
}

/**
 * A TCP proxy on 127.0.0.1 to `port`: `cut()` closes its connections and
 * refuses new ones, `switchTo(port)` sends new connections elsewhere and
 * closes the open ones (as a failover of a floating address does).
 */
export const proxy = async (port) => {
  let target = port
  let cut = false
  const open = new Set()
  const server = createServer((client) => {
    if (cut) return void client.destroy()
    const upstream = createConnection({ host: "127.0.0.1", port: target })
    open.add(client).add(upstream)
    const end = () => {
      client.destroy()
      upstream.destroy()
      open.delete(client)
      open.delete(upstream)
    }
    client.on("error", end).on("close", end)
    upstream.on("error", end).on("close", end)
    client.pipe(upstream).pipe(client)
  })
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve))
  const closeOpen = () => {
    for (const socket of open) socket.destroy()
    open.clear()
  }
  return {
    port: server.address().port,
    cut: () => void ((cut = true), closeOpen()),
    switchTo: (next) => void ((target = next), closeOpen()),
    close: () => new Promise((resolve) => {
      closeOpen()
      server.close(() => resolve())
    })
  }
}

const conf = (settings) => Object.entries(settings).map(([name, value]) => `${name} = '${value}'\n`).join("")
const urlOf = (port) => `postgres://postgres@127.0.0.1:${port}/postgres`

/** The timeline the server at `url` writes on (a standby: the one its last restartpoint records). */
export const timelineOf = async (url) => {
  const [row] = await queryOn(url, `SELECT CASE WHEN pg_is_in_recovery() THEN (SELECT timeline_id FROM pg_control_checkpoint())::bigint
    ELSE ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint END AS timeline`)
  return Number(row.timeline)
}

/** Why a failover soak cannot run here, or undefined when it can. */
export const clusterUnavailable = () => {
  if (bindir() === undefined) return `no Postgres server programs (${PROGRAMS.join(", ")}) found`
  if (isRoot && spawnSync("id", ["-u", "postgres"]).status !== 0) return "running as root with no `postgres` OS user to run the servers as"
  return undefined
}

/**
 * Starts a primary and its streaming replica (`mode`: "async" or "sync") and
 * the floating address in front of the primary. Returns `{ url, mode,
 * primaryUrl, replicaUrl, dir, cutReplica(), crashPrimary(), promoteReplica(),
 * switchToReplica(), close({ keep }) }`; `url` is the floating address
 * (`postgres://…/postgres`).
 */
export const startCluster = async (mode) => {
  const bin = bindir()
  const dir = mkdtempSync(join(tmpdir(), "connector-store-soak-pg-"))
  if (isRoot) {
    const id = (flag) => Number(spawnSync("id", [flag, "postgres"], { encoding: "utf8" }).stdout.trim())
    chownSync(dir, id("-u"), id("-g"))
  }
  const running = new Set()
  const pgCtl = (dataDir, args) => run(bin, "pg_ctl", [...args, "-D", dataDir], dir)
  const server = (dataDir, port) => ({
    dataDir, port, url: urlOf(port),
    start: async () => {
      await pgCtl(dataDir, ["start", "-w", "-t", "60", "-l", `${dataDir}.log`])
      running.add(dataDir)
    },
    crash: async () => {
      await pgCtl(dataDir, ["stop", "-w", "-t", "60", "-m", "immediate"])
      running.delete(dataDir)
    }
  })
  // Whatever happens to this process short of SIGKILL, no server outlives it.
  const stopAll = () => {
    const pgCtlPath = join(bin, "pg_ctl")
    for (const dataDir of running) {
      const args = ["stop", "-D", dataDir, "-m", "immediate", "-w"]
      if (isRoot) spawnSync("runuser", ["-u", "postgres", "--", pgCtlPath, ...args], { stdio: "ignore" })
      else spawnSync(pgCtlPath, args, { stdio: "ignore" })
    }
    running.clear()
  }
  process.once("exit", stopAll)

  const primaryDir = join(dir, "primary")
  await run(bin, "initdb", ["-D", primaryDir, "-A", "trust", "-U", "postgres", "-E", "UTF8", "--locale=C", "--no-sync"], dir)
  const primaryPort = await freePort()
  appendFileSync(join(primaryDir, "postgresql.conf"), conf({
    listen_addresses: "127.0.0.1", port: primaryPort, unix_socket_directories: dir, wal_level: "replica", max_wal_senders: 4,
    wal_keep_size: "256MB", shared_buffers: "32MB", max_connections: 100, fsync: "on"
  }))
  const primary = server(primaryDir, primaryPort)
  await primary.start()

  const replicaDir = join(dir, "replica")
  await run(bin, "pg_basebackup", ["-D", replicaDir, "-h", "127.0.0.1", "-p", String(primaryPort), "-U", "postgres", "-X", "stream", "-R", "-c", "fast", "--no-sync"], dir)
  const link = await proxy(primaryPort)
  const replicaPort = await freePort()
  // Later lines of postgresql.auto.conf win over what pg_basebackup -R wrote; promoted, it waits for no standby.
  appendFileSync(join(replicaDir, "postgresql.auto.conf"), conf({
    port: replicaPort, primary_conninfo: `host=127.0.0.1 port=${link.port} user=postgres application_name=soak_replica`,
    wal_retrieve_retry_interval: "100ms", synchronous_standby_names: ""
  }))
  const replica = server(replicaDir, replicaPort)
  await replica.start()
  if (mode === "sync") {
    await queryOn(primary.url, `ALTER SYSTEM SET synchronous_standby_names = '"soak_replica"'`)
    await queryOn(primary.url, "ALTER SYSTEM SET synchronous_commit = 'on'")
    await queryOn(primary.url, "SELECT pg_reload_conf()")
  }
  await until("the replica to stream", async () => (await queryOn(primary.url,
    "SELECT 1 FROM pg_stat_replication WHERE application_name = 'soak_replica' AND state = 'streaming' AND ($1 = 'async' OR sync_state = 'sync')",
    [mode])).length === 1)
  const floating = await proxy(primaryPort)

  return {
    url: urlOf(floating.port),
    mode,
    dir,
    primaryUrl: primary.url,
    replicaUrl: replica.url,
    /** The replica receives no more WAL: a promotion cannot replay what the primary commits from now on. */
    cutReplica: async () => {
      link.cut()
      await until("the replica to stop receiving WAL", async () =>
        (await queryOn(replica.url, "SELECT 1 FROM pg_stat_wal_receiver WHERE status = 'streaming'")).length === 0)
    },
    /** An immediate stop: no shutdown checkpoint, every connection dropped. */
    crashPrimary: () => primary.crash(),
    /** `pg_ctl promote`, then waits until it accepts writes. */
    promoteReplica: async () => {
      await pgCtl(replicaDir, ["promote", "-w", "-t", "60"])
      await until("the promoted replica to accept writes", async () =>
        (await queryOn(replica.url, "SELECT pg_is_in_recovery() AS r"))[0].r === false)
    },
    /** The floating address now leads to the promoted replica. */
    switchToReplica: () => floating.switchTo(replicaPort),
    /** Stops the servers and the proxies; removes the folder unless `keep`. */
    close: async ({ keep = false } = {}) => {
      await floating.close()
      await link.close()
      for (const dataDir of [...running]) await pgCtl(dataDir, ["stop", "-w", "-t", "60", "-m", "immediate"]).catch(() => {})
      running.clear()
      process.removeListener("exit", stopAll)
      if (!keep) rmSync(dir, { recursive: true, force: true })
    }
  }
}
