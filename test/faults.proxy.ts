import { createConnection, createServer, type Server, type Socket } from "node:net"
import { afterEach, beforeAll } from "vitest"
import { pgDatabaseForFile } from "./support/databases.js"

/**
 * A TCP proxy on 127.0.0.1 in front of a Postgres server that can lose the
 * acknowledgement of a COMMIT: armed, it closes the client's connection
 * instead of forwarding the server's `CommandComplete` for the next COMMIT
 * it sees. The server has committed by then; the client only learns that
 * its connection died. It can also black-hole every connection (see
 * `blackHole`, `sever`), go down as a restarting server does (`down`),
 * and heal.
 */
export interface CommitDropProxy {
  /** The proxy's port; point a Postgres URL at 127.0.0.1 on it. */
  readonly port: number
  /**
   * Drops the acknowledgement of the next statement completing with
   * `commandTag` (`COMMIT` by default; `INSERT` for an autocommit insert)
   * on any connection, once.
   */
  armCommitDrop(commandTag?: string): void
  /** How many acknowledgements were dropped so far. */
  readonly dropped: () => number
  /**
   * A network partition that closes nothing (a NAT entry timed out, a load
   * balancer gone quiet): from now on no byte is forwarded either way, on
   * the connections open now and on new ones, and no socket is closed. A
   * connection caught in it stays silent for good, as a connection whose
   * NAT entry is lost does.
   */
  blackHole(): void
  /**
   * As `blackHole`, and a client closing its connection is not heard
   * either: the server's side of it stays open (until `close`), as a
   * server beyond a partition sees nothing of a client that gave up.
   */
  sever(): void
  /**
   * New connections are accepted and then hear nothing, either way (a
   * cancel request sent on one never reaches the server); the connections
   * open now keep forwarding, and closing one still closes its server side.
   */
  silenceNew(): void
  /**
   * The server goes down, as in a restart: every connection open now is
   * closed, both sides, and new ones are closed as soon as they are
   * accepted, until `heal`.
   */
  down(): void
  /** The partition heals: new connections are forwarded again (the ones caught in it stay silent). */
  heal(): void
  /** How many client connections the proxy has accepted so far. */
  readonly accepted: () => number
  close(): Promise<void>
}

/** The server's CommandComplete ('C') message whose tag starts with `commandTag` (`COMMIT`, `INSERT 0 1`). */
const completes = (commandTag: string, type: number, body: Buffer): boolean =>
  type === 0x43 && body.toString("latin1").replace(/\0+$/, "").split(" ")[0] === commandTag

/**
 * Splits the server-to-client stream into messages (type byte, int32 length
 * including itself, body), calling `onMessage` for each whole one; returns
 * the bytes of an incomplete trailing message.
 */
const frames = (buffer: Buffer, onMessage: (type: number, whole: Buffer, body: Buffer) => boolean): Buffer => {
  let offset = 0
  while (buffer.length - offset >= 5) {
    const length = buffer.readInt32BE(offset + 1)
    if (buffer.length - offset < 1 + length) break
    const whole = buffer.subarray(offset, offset + 1 + length)
    if (!onMessage(buffer[offset]!, whole, whole.subarray(5))) return Buffer.alloc(0)
    offset += 1 + length
  }
  return buffer.subarray(offset)
}

/** Starts a proxy to `target` (host and port of the Postgres server). */
export const startCommitDropProxy = (target: { readonly host: string; readonly port: number }): Promise<CommitDropProxy> => {
  let armed: string | undefined
  let dropped = 0
  let accepted = 0
  let partitioned = false
  let severed = false
  let newSilent = false
  let isDown = false
  /** Marks every connection open now as caught in the partition. */
  const catchers = new Set<() => void>()
  const sockets = new Set<Socket>()
  const server: Server = createServer((client) => {
    accepted++
    if (isDown) {
      client.destroy()
      return
    }
    const upstream = createConnection({ host: target.host, port: target.port })
    sockets.add(client)
    sockets.add(upstream)
    let silent = partitioned || newSilent
    const silence = () => {
      silent = true
    }
    catchers.add(silence)
    const closeBoth = () => {
      client.destroy()
      upstream.destroy()
      sockets.delete(client)
      sockets.delete(upstream)
      catchers.delete(silence)
    }
    const clientGone = () => {
      if (!(silent && severed)) return closeBoth()
      client.destroy()
      sockets.delete(client)
    }
    client.on("error", clientGone)
    upstream.on("error", closeBoth)
    client.on("close", clientGone)
    upstream.on("close", closeBoth)
    client.on("data", (chunk) => {
      if (!silent) upstream.write(chunk)
    })
    // Server-to-client traffic is framed from its first byte (no TLS is asked for).
    let pending: Buffer = Buffer.alloc(0)
    upstream.on("data", (chunk) => {
      if (silent) return
      pending = frames(Buffer.concat([pending, chunk]), (type, whole, body) => {
        if (armed !== undefined && completes(armed, type, body)) {
          armed = undefined
          dropped++
          closeBoth()
          return false
        }
        client.write(whole)
        return true
      })
    })
  })
  return new Promise((resolve) => {
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      resolve({
        port,
        armCommitDrop: (commandTag = "COMMIT") => {
          armed = commandTag
        },
        dropped: () => dropped,
        blackHole: () => {
          partitioned = true
          for (const silence of catchers) silence()
        },
        sever: () => {
          severed = true
          partitioned = true
          for (const silence of catchers) silence()
        },
        silenceNew: () => {
          newSilent = true
        },
        down: () => {
          isDown = true
          for (const socket of sockets) socket.destroy()
        },
        heal: () => {
          partitioned = false
          severed = false
          newSilent = false
          isDown = false
        },
        accepted: () => accepted,
        close: () =>
          new Promise<void>((done) => {
            for (const socket of sockets) socket.destroy()
            server.close(() => done())
          })
      })
    })
  })
}

/**
 * Called in a `describe`: the file's Postgres database (`direct()`, from
 * `beforeAll`), and `proxied()`, a proxy of its own in front of it with the
 * URL that reaches the database through it. After each test every proxy
 * heals, the stores `track` was given close, then the proxies.
 */
export const proxiedDatabase = () => {
  let direct = ""
  const opened: Array<{ readonly store: { close(): Promise<void> }; readonly proxy: CommitDropProxy }> = []
  beforeAll(async () => {
    direct = await pgDatabaseForFile()
  })
  afterEach(async () => {
    for (const { store, proxy } of opened.splice(0)) {
      proxy.heal()
      await store.close()
      await proxy.close()
    }
  })
  return {
    direct: () => direct,
    proxied: async (): Promise<{ readonly proxy: CommitDropProxy; readonly url: string }> => {
      const target = new URL(direct)
      const proxy = await startCommitDropProxy({ host: target.hostname, port: Number(target.port || 5432) })
      const viaProxy = new URL(direct)
      viaProxy.port = String(proxy.port)
      return { proxy, url: viaProxy.toString() }
    },
    track: (store: { close(): Promise<void> }, proxy: CommitDropProxy): void => {
      opened.push({ store, proxy })
    }
  }
}
