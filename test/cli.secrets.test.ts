import { randomBytes } from "node:crypto"
import { createServer } from "node:net"
import * as Sql from "@connector-store/sql-adapter"
import { Effect, Exit, Layer } from "effect"
import pg from "pg"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type CliRun, runCli } from "./support/cli/run.js"
import { freshPrefix, PG_ADMIN_URL, pgAvailable, pgDatabaseForFile } from "./support/databases.js"
import { revealsNothing, watchingLogsAndSpans } from "./support/secrecy.js"

// The CLI tests spawn the built CLI: `npm run build` first.

/** A password with an `@` and a `/` in it, as a person pastes one; its pieces are distinct enough to be searched for. */
const SPLIT = "pw7Qz@kx9Vb/mt4Hn"
/** A password without reserved characters. */
const PLAIN = "Sx7rPlainQw2"

/** Every text that would give a password away, in full or in part. */
const secretsOf = (password: string): ReadonlyArray<string> =>
  [password, encodeURIComponent(password), ...password.split(/[@/]/)].filter((text) => text.length >= 4)

interface Shape {
  readonly name: string
  readonly url: (role: string, hostPort: string, database: string) => string
  readonly secrets: ReadonlyArray<string>
}

/** The URL shapes a password was printed from, each naming `role` on `hostPort`. */
const SHAPES: ReadonlyArray<Shape> = [
  { name: "an empty user", url: (_role, at, db) => `postgres://:${PLAIN}@${at}/${db}`, secrets: secretsOf(PLAIN) },
  { name: "an unencoded @ and / in the password", url: (role, at, db) => `postgres://${role}:${SPLIT}@${at}/${db}`, secrets: secretsOf(SPLIT) },
  { name: "?password=", url: (role, at, db) => `postgres://${role}@${at}/${db}?password=${PLAIN}`, secrets: secretsOf(PLAIN) },
  { name: "?sslmode=disable&password=", url: (role, at, db) => `postgresql://${role}@${at}/${db}?sslmode=disable&password=${PLAIN}`, secrets: secretsOf(PLAIN) },
  {
    name: "a percent-encoded password",
    url: (role, at, db) => `postgres://${role}:${encodeURIComponent(SPLIT)}@${at}/${db}`,
    secrets: secretsOf(SPLIT)
  },
  { name: "a plain user:password", url: (role, at, db) => `postgres://${role}:${PLAIN}@${at}/${db}`, secrets: secretsOf(PLAIN) }
]

/** The shapes the CLI runs are spawned for (each is one process per command and target); the library test takes them all. */
const CLI_SHAPES = ["an empty user", "an unencoded @ and / in the password", "?password=", "a percent-encoded password"]

const COMMANDS: ReadonlyArray<ReadonlyArray<string>> = [
  ["status"],
  ["migrate"],
  ["operations"],
  ["settle", "--caller", "did:caller:1", "--operation", "op-1", "--outcome", "dead"]
]

const expectNoSecret = (run: CliRun, secrets: ReadonlyArray<string>, what: string) => {
  for (const secret of secrets) {
    expect(run.stdout, `${what}: stdout`).not.toContain(secret)
    expect(run.stderr, `${what}: stderr`).not.toContain(secret)
  }
}

/** Runs `tasks` at most `width` at a time (each spawns a CLI process). */
const inBatches = async <A>(tasks: ReadonlyArray<() => Promise<A>>, width = 4): Promise<ReadonlyArray<A>> => {
  const out: Array<A> = []
  for (let i = 0; i < tasks.length; i += width) out.push(...await Promise.all(tasks.slice(i, i + width).map((task) => task())))
  return out
}

/** A TCP port on 127.0.0.1 nothing listens on. */
const closedPort = (): Promise<number> =>
  new Promise((resolve) => {
    const server = createServer()
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number }
      server.close(() => resolve(port))
    })
  })

describe("the database URL as it may be printed", () => {
  it("redacts the password of every Postgres URL shape, and leaves SQLite paths as they are", () => {
    expect(Sql.redactDatabaseUrl("postgres://ops:hunter22@db:5432/store")).toBe("postgres://ops:***@db:5432/store")
    expect(Sql.redactDatabaseUrl("postgres://:hunter22@db/store")).toBe("postgres://:***@db/store")
    expect(Sql.redactDatabaseUrl("postgres://ops:p%40ss@db/store")).toBe("postgres://ops:***@db/store")
    expect(Sql.redactDatabaseUrl("postgres://ops:p@ss@db/store")).toBe("postgres://ops:***@db/store")
    expect(Sql.redactDatabaseUrl("postgres://ops@db/store?sslmode=require&password=hunter22")).toBe(
      "postgres://ops@db/store?sslmode=require&password=***"
    )
    expect(Sql.redactDatabaseUrl("postgresql://ops@db/store?sslpassword=hunter22")).toBe("postgresql://ops@db/store?sslpassword=***")
    expect(Sql.redactDatabaseUrl("postgres://ops:p@ss/w@db/store")).toBe("postgres://***@db/store")
    expect(Sql.redactDatabaseUrl("postgres://db/store")).toBe("postgres://db/store")
    expect(Sql.redactDatabaseUrl("/var/lib/store.sqlite")).toBe("/var/lib/store.sqlite")
  })

  it("refuses a Postgres URL the driver would cut inside its password, without repeating any of it", () => {
    for (const url of ["postgres://ops:p@ss/w@db/store", "postgres://ops:p/ss@db/store", "postgres://ops:12?34@db/store", "postgres://ops:p#w@db/x"]) {
      const problem = Sql.databaseUrlProblem(url)
      expect(problem, url).toMatch(/percent-encode/)
      for (const piece of ["p@ss", "ss/w", "12?34", "p#w"]) expect(problem).not.toContain(piece)
    }
    // An @ in a query value (a user name on a managed server) is the writer's meaning, not a misread password.
    expect(Sql.databaseUrlProblem("postgres://db/store?user=ops@server")).toBeUndefined()
    expect(Sql.databaseUrlProblem("postgres://ops:p@ss@db/store")).toBeUndefined()
  })

  it("takes every secret of a URL out of a driver's text", () => {
    const url = `postgres://ops:${encodeURIComponent(SPLIT)}@db/store?password=${PLAIN}`
    const text = `failed for ${url}: ${SPLIT} / ${PLAIN}`
    const scrubbed = Sql.redactSecrets(text, url)
    for (const secret of [...secretsOf(SPLIT), ...secretsOf(PLAIN)]) expect(scrubbed).not.toContain(secret)
    expect(scrubbed).toContain("postgres://ops:***@db/store?password=***")
    expect(Sql.redactSecrets("nothing secret here", "/var/lib/store.sqlite")).toBe("nothing secret here")
  })
})

if (pgAvailable) {
  describe("a Postgres password reaches no printed line, log line or span", { timeout: 600_000 }, () => {
    const role = `cs_secret_${process.pid}`
    let database = ""
    let unreachable = ""

    beforeAll(async () => {
      database = new URL(await pgDatabaseForFile()).pathname.slice(1)
      unreachable = `127.0.0.1:${await closedPort()}`
      const admin = new pg.Client({ connectionString: PG_ADMIN_URL })
      await admin.connect()
      try {
        await admin.query(`DROP ROLE IF EXISTS ${role}`)
        await admin.query(`CREATE ROLE ${role} LOGIN PASSWORD '${PLAIN}'`)
      } finally {
        await admin.end()
      }
    })

    afterAll(async () => {
      const admin = new pg.Client({ connectionString: PG_ADMIN_URL })
      await admin.connect()
      try {
        await admin.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1`, [role])
        await admin.query(`DROP OWNED BY ${role}`).catch(() => undefined)
        await admin.query(`DROP ROLE IF EXISTS ${role}`)
      } finally {
        await admin.end()
      }
    })

    /**
     * Where the URL points: a port nothing listens on; a role the server
     * does not know (it refuses the login); the role created with a
     * password, on a database with no store in it (the server lets it in).
     */
    const targets = () => [
      { name: "an unreachable port", role, at: unreachable },
      { name: "a role the server refuses", role: `cs_nobody_${randomBytes(3).toString("hex")}`, at: "127.0.0.1:5432" },
      { name: "a role the server lets in, no store", role, at: "127.0.0.1:5432" }
    ]

    it("status, migrate, operations and settle print none of it, on stdout or stderr, for every URL shape", async () => {
      const runs: Array<() => Promise<void>> = []
      for (const target of targets()) {
        // Two commands suffice where the server lets the role in: what differs is the line of a refused open.
        const commands = target.role === role && target.at !== unreachable ? COMMANDS.slice(0, 2) : COMMANDS
        for (const shape of SHAPES.filter((each) => CLI_SHAPES.includes(each.name))) {
          for (const command of commands) {
            const url = shape.url(target.role, target.at, database)
            const what = `${command[0]} on ${target.name} with ${shape.name}`
            runs.push(async () => {
              const run = await runCli([...command, "--database", url, "--table-prefix", freshPrefix(), "--connect-timeout", "5"])
              expectNoSecret(run, shape.secrets, what)
              if (command[0] !== "migrate" || target.at === unreachable || target.role !== role) expect(run.code, what).toBe(1)
              expect(run.stderr.split("\n").filter((line) => line.length > 0).length, `${what}: ${run.stderr}`).toBeLessThanOrEqual(1)
            })
          }
        }
      }
      await inBatches(runs)
    })

    it("nor from $CONNECTOR_STORE_DATABASE", async () => {
      for (const shape of SHAPES) {
        const run = await runCli(["status"], { CONNECTOR_STORE_DATABASE: shape.url(role, unreachable, database) })
        expect(run.code).toBe(1)
        expectNoSecret(run, shape.secrets, `status from the environment with ${shape.name}`)
      }
    })

    it("the library's open fails with no password in its error, its log lines or its spans", async () => {
      for (const target of targets()) {
        for (const shape of SHAPES) {
          const url = shape.url(target.role, target.at, database)
          const watched = await Effect.runPromise(watchingLogsAndSpans(
            Effect.scoped(Layer.build(Sql.layer({ url, readOnly: true, tablePrefix: freshPrefix(), maxConnections: 1 })))
          ))
          const what = `${target.name} with ${shape.name}`
          expect(Exit.isFailure(watched.exit), what).toBe(true)
          for (const secret of shape.secrets) {
            revealsNothing(watched.exit, secret)
            for (const line of watched.lines) expect(line, what).not.toContain(secret)
            for (const span of watched.spans) revealsNothing({ name: span.name, attributes: Object.fromEntries(span.attributes), events: span.events }, secret)
          }
        }
      }
    })
  })
}
