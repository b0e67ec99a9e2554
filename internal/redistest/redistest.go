// Package redistest is the old import path of tests/redistest, which starts
// real redis-server processes for tests. The harnesses left internal/ so that
// internal/ holds only the engine (docs/design.md section 7); this package
// forwards every name to the new path, so that tests written against the
// old one still build and run the same servers.
//
// Deprecated: import github.com/tenure-go/tenure/tests/redistest.
package redistest

import "github.com/tenure-go/tenure/tests/redistest"

// The types, the same as tests/redistest's.
type (
	AOFMark  = redistest.AOFMark
	Certs    = redistest.Certs
	Cluster  = redistest.Cluster
	Command  = redistest.Command
	Config   = redistest.Config
	Monitor  = redistest.Monitor
	Proxy    = redistest.Proxy
	Sentinel = redistest.Sentinel
	Server   = redistest.Server
	TLS      = redistest.TLS
	User     = redistest.User
)

// The constants of tests/redistest.
const (
	ClusterNodeTimeout      = redistest.ClusterNodeTimeout
	SentinelDownAfter       = redistest.SentinelDownAfter
	SentinelFailoverTimeout = redistest.SentinelFailoverTimeout
	SentinelMasterName      = redistest.SentinelMasterName
	StartTimeout            = redistest.StartTimeout
)

// The variables of tests/redistest: the same values, so that errors.Is
// matches either name.
var (
	ACLClusterCommands  = redistest.ACLClusterCommands
	ACLCommands         = redistest.ACLCommands
	ACLIdentityCommands = redistest.ACLIdentityCommands
	ErrNotRunning       = redistest.ErrNotRunning
	ErrStopped          = redistest.ErrStopped
)

// The functions of tests/redistest.
var (
	ACLClusterRule      = redistest.ACLClusterRule
	ACLRule             = redistest.ACLRule
	Binary              = redistest.Binary
	BinaryVersion       = redistest.BinaryVersion
	WithIdentity        = redistest.WithIdentity
	Leaks               = redistest.Leaks
	Main                = redistest.Main
	ScriptKeyViolations = redistest.ScriptKeyViolations
	WaitNoKeys          = redistest.WaitNoKeys
	MustCerts           = redistest.MustCerts
	NewCerts            = redistest.NewCerts
	NewCluster          = redistest.NewCluster
	NewClusterConfig    = redistest.NewClusterConfig
	StartCluster        = redistest.StartCluster
	StartClusterConfig  = redistest.StartClusterConfig
	NewProxy            = redistest.NewProxy
	StartProxy          = redistest.StartProxy
	NewSentinel         = redistest.NewSentinel
	NewSentinelConfig   = redistest.NewSentinelConfig
	StartSentinel       = redistest.StartSentinel
	StartSentinelConfig = redistest.StartSentinelConfig
	Start               = redistest.Start
	StartServer         = redistest.StartServer
)
