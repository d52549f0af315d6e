package topo

// NVML is the part of the NVIDIA Management Library that topo reads: SystemNVML() for
// libnvidia-ml.so.1, topotest.Machine in tests. Init must succeed before any other call;
// Shutdown undoes one Init (NVML counts them).
type NVML interface {
	Init() error
	Shutdown() error
	// ErrorString is NVML's text for a result code, as FieldValue.Return carries one.
	ErrorString(r Return) string
	DriverVersion() (string, error)
	// CUDADriverVersion is the CUDA version the driver supports, e.g. 13000.
	CUDADriverVersion() (int, error)
	DeviceCount() (int, error)
	DeviceByIndex(i int) (Device, error)
}

// Device is one GPU as NVML sees it. link is an NVLink index, 0 to MaxNVLinks-1.
type Device interface {
	Name() (string, error)
	// PCIBusID is the bus ID as NVML writes it, with an 8-digit domain: 00000000:18:00.0.
	PCIBusID() (string, error)
	Memory() (Memory, error)
	NVLinkActive(link int) (bool, error)
	NVLinkVersion(link int) (NVLinkVersion, error)
	NVLinkRemoteType(link int) (NVLinkRemoteType, error)
	// NVLinkRemoteBusID is the PCI bus ID of the device at the link's far end.
	NVLinkRemoteBusID(link int) (string, error)
	// CommonAncestor is the closest point of the PCIe tree that this GPU shares with
	// other, a Device of the same NVML.
	CommonAncestor(other Device) (TopologyLevel, error)
	// PCIeLink is the current PCIe generation and lane count.
	PCIeLink() (gen, width int, err error)
	// FieldValues fills in Value, ValueType, Timestamp and Return of each entry of
	// values, whose FieldID and ScopeID the caller set. Each entry's Return says
	// whether its Value is valid.
	FieldValues(values []FieldValue) error
}

// Return is an NVML result code (nvmlReturn_t).
type Return int32

// The result codes topo tells apart.
const (
	Success               Return = 0
	ErrorUninitialized    Return = 1
	ErrorInvalidArgument  Return = 2
	ErrorNotSupported     Return = 3
	ErrorLibraryNotFound  Return = 12
	ErrorFunctionNotFound Return = 13
)

// Error is a failed NVML call. It reads as NVML's own text (nvmlErrorString), the
// way callers have always printed it after saying what they asked for.
type Error struct {
	Code Return
	Text string
}

func (e *Error) Error() string { return e.Text }

// MaxNVLinks is how many NVLinks one GPU can have (NVML_NVLINK_MAX_LINKS).
const MaxNVLinks = 36

// NVLinkVersion is an nvmlNvlinkVersion_t: an enumeration, not the version number.
type NVLinkVersion uint32

const (
	NVLink1_0 NVLinkVersion = 1
	NVLink2_0 NVLinkVersion = 2
	NVLink2_2 NVLinkVersion = 3
	NVLink3_0 NVLinkVersion = 4
	NVLink3_1 NVLinkVersion = 5
	NVLink4_0 NVLinkVersion = 6
	NVLink5_0 NVLinkVersion = 7
	NVLink6_0 NVLinkVersion = 8
)

// NVLinkRemoteType is what sits at an NVLink's far end (nvmlIntNvLinkDeviceType_t).
type NVLinkRemoteType uint32

const (
	RemoteGPU     NVLinkRemoteType = 0
	RemoteIBMNPU  NVLinkRemoteType = 1
	RemoteSwitch  NVLinkRemoteType = 2
	RemoteUnknown NVLinkRemoteType = 255
)

// TopologyLevel is how far apart two GPUs sit in the PCIe tree (nvmlGpuTopologyLevel_t).
type TopologyLevel uint32

const (
	TopologyInternal   TopologyLevel = 0  // the same board
	TopologySingle     TopologyLevel = 10 // one PCIe switch
	TopologyMultiple   TopologyLevel = 20 // several PCIe switches, no host bridge
	TopologyHostBridge TopologyLevel = 30 // the same host bridge
	TopologyNode       TopologyLevel = 40 // host bridges of one NUMA node
	TopologySystem     TopologyLevel = 50 // across NUMA nodes (SMP interconnect)
)

// Memory is a GPU's memory in bytes, laid out as nvmlMemory_t.
type Memory struct {
	Total, Free, Used uint64
}

// FieldValue is one field of nvmlDeviceGetFieldValues, laid out exactly as
// nvmlFieldValue_t (40 bytes) so that a slice of them goes to NVML as it is.
type FieldValue struct {
	FieldID     uint32 // one of the Field* constants
	ScopeID     uint32 // the NVLink index for the NVLink fields
	Timestamp   int64  // microseconds since 1970
	LatencyUsec int64
	ValueType   uint32  // nvmlValueType_t; ValueUint64 for the NVLink throughput fields
	Return      Return  // whether Value is valid
	Value       [8]byte // nvmlValue_t, a union of at most 8 bytes, in the host's byte order
}

// ValueUint64 is nvmlValueType_t's unsigned long long.
const ValueUint64 = 3

// The NVLink throughput fields (NVML_FI_DEV_NVLINK_THROUGHPUT_*), in KiB since the
// driver loaded; the scope is the link.
const (
	FieldNVLinkDataTX uint32 = 138
	FieldNVLinkDataRX uint32 = 139
	FieldNVLinkRawTX  uint32 = 140
	FieldNVLinkRawRX  uint32 = 141
)
