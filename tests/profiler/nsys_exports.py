"""Nsight Systems SQLite exports built for the tests, with the tables and columns that
``nsys export --type sqlite`` writes (Nsight Systems 2023-2025; every column of the tables read,
as the export declares them). Nsight Systems does not run here; the files are real SQLite.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

SCHEMA = """
CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE ThreadNames (nameId INTEGER NOT NULL REFERENCES StringIds(id), priority INTEGER,
    globalTid INTEGER);
CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs INTEGER, utcTime TEXT, localTime TEXT);
CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL,
    rangeId INTEGER, category INTEGER, color INTEGER, text TEXT, globalTid INTEGER,
    endGlobalTid INTEGER, textId INTEGER REFERENCES StringIds(id), domainId INTEGER,
    uint64Value INTEGER, int64Value INTEGER, doubleValue REAL, uint32Value INTEGER,
    int32Value INTEGER, floatValue REAL, jsonTextId INTEGER, jsonText TEXT);
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL,
    eventClass INTEGER NOT NULL, globalTid INTEGER, correlationId INTEGER,
    nameId INTEGER NOT NULL REFERENCES StringIds(id), returnValue INTEGER NOT NULL, callchainId INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL,
    deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, greenContextId INTEGER,
    streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,
    demangledName INTEGER NOT NULL REFERENCES StringIds(id),
    shortName INTEGER NOT NULL REFERENCES StringIds(id), mangledName INTEGER REFERENCES StringIds(id),
    launchType INTEGER, cacheConfig INTEGER, registersPerThread INTEGER NOT NULL,
    gridX INTEGER NOT NULL, gridY INTEGER NOT NULL, gridZ INTEGER NOT NULL,
    blockX INTEGER NOT NULL, blockY INTEGER NOT NULL, blockZ INTEGER NOT NULL,
    staticSharedMemory INTEGER NOT NULL, dynamicSharedMemory INTEGER NOT NULL,
    localMemoryPerThread INTEGER NOT NULL, localMemoryTotal INTEGER NOT NULL,
    gridId INTEGER NOT NULL, sharedMemoryExecuted INTEGER, graphNodeId INTEGER,
    sharedMemoryLimitConfig INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INTEGER NOT NULL, end INTEGER NOT NULL,
    deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, greenContextId INTEGER,
    streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, bytes INTEGER NOT NULL,
    copyKind INTEGER NOT NULL, deprecatedSrcId INTEGER, srcKind INTEGER, dstKind INTEGER,
    srcDeviceId INTEGER, srcContextId INTEGER, dstDeviceId INTEGER, dstContextId INTEGER,
    migrationCause INTEGER, graphNodeId INTEGER, virtualAddress INTEGER);
"""

PUSH_POP = 59
DOMAIN_CREATE = 75
CATEGORY_NAME = 33


def global_tid(pid: int, tid: int) -> int:
    """Nsight's serialised thread id: the process above the low 24 bits."""
    return (pid << 24) | tid


class NsysExport:
    """Builds one export: ranges, domains, categories and kernels with their launches."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.connection = sqlite3.connect(self.path)
        self.connection.executescript(SCHEMA)
        self.strings: dict[str, int] = {}
        self.correlation = 0

    def string(self, value: str) -> int:
        if value not in self.strings:
            self.strings[value] = len(self.strings) + 1
            self.connection.execute("INSERT INTO StringIds VALUES (?, ?)", (self.strings[value], value))
        return self.strings[value]

    def domain(self, domain_id: int, name: str, thread: int) -> None:
        self.connection.execute(
            "INSERT INTO NVTX_EVENTS (start, end, eventType, globalTid, text, domainId) VALUES (0, NULL, ?, ?, ?, ?)",
            (DOMAIN_CREATE, thread, name, domain_id))

    def category(self, domain_id: int, category: int, name: str, thread: int) -> None:
        self.connection.execute(
            "INSERT INTO NVTX_EVENTS (start, end, eventType, globalTid, text, domainId, category) "
            "VALUES (0, NULL, ?, ?, ?, ?, ?)", (CATEGORY_NAME, thread, name, domain_id, category))

    def range(self, start: int, end: int, thread: int, text: str, *, domain_id: int = 0,
              category: int = 0, registered: bool = False, payload: int | None = None) -> None:
        """A push/pop range; ``registered`` stores its text in StringIds, as Nsight does for
        registered strings (the nvtx package's)."""
        message, message_id = (None, self.string(text)) if registered else (text, None)
        self.connection.execute(
            "INSERT INTO NVTX_EVENTS (start, end, eventType, globalTid, text, textId, domainId, category, "
            "int64Value) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (start, end, PUSH_POP, thread, message, message_id, domain_id, category, payload))

    def kernel(self, launched_at: int, thread: int, start: int, end: int, name: str = "gemm",
               device: int = 0) -> None:
        """A kernel and the cudaLaunchKernel call on ``thread`` that launched it."""
        self.correlation += 1
        self.connection.execute(
            "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?, ?, 0, ?, ?, ?, 0, NULL)",
            (launched_at, launched_at + 5, thread, self.correlation, self.string("cudaLaunchKernel_v7000")))
        pid = thread >> 24
        self.connection.execute(
            "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, contextId, streamId, correlationId, "
            "globalPid, demangledName, shortName, registersPerThread, gridX, gridY, gridZ, blockX, blockY, "
            "blockZ, staticSharedMemory, dynamicSharedMemory, localMemoryPerThread, localMemoryTotal, gridId) "
            "VALUES (?, ?, ?, 1, 7, ?, ?, ?, ?, 32, 1, 1, 1, 128, 1, 1, 0, 0, 0, 0, ?)",
            (start, end, device, self.correlation, pid << 24, self.string(name), self.string(name), self.correlation))

    def copy(self, launched_at: int, thread: int, start: int, end: int, size: int = 4096) -> None:
        self.correlation += 1
        self.connection.execute(
            "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?, ?, 0, ?, ?, ?, 0, NULL)",
            (launched_at, launched_at + 5, thread, self.correlation, self.string("cudaMemcpyAsync_v3020")))
        self.connection.execute(
            "INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY (start, end, deviceId, contextId, streamId, correlationId, "
            "globalPid, bytes, copyKind) VALUES (?, ?, 0, 1, 7, ?, ?, ?, 1)",
            (start, end, self.correlation, (thread >> 24) << 24, size))

    def close(self) -> Path:
        self.connection.commit()
        self.connection.close()
        return self.path
