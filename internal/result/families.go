package result

import (
	"github.com/symmem/symmem/internal/ops"
	"github.com/symmem/symmem/internal/report"
)

// rowKind is how the rows of one family of operations (ops.Family) are derived and
// drawn; everything else about a row's operation is asked of the operation.
type rowKind struct {
	// table draws an operation's rows.
	table func(res Result, op string, x extras, named bool) report.Table
	// roundTrip: a row is a round trip, timed with no bandwidth, every round a sample.
	roundTrip bool
	// everyRank: one row per job (ranks set), not one per pair (src, dst).
	everyRank bool
	// crossed: the bus bandwidth is the bytes that crossed to other ranks; bus: the
	// algorithm bandwidth times the operation's bus factor (ops.Op.BusFactor).
	crossed, bus bool
	// sizeless: a row moves no size (a meeting).
	sizeless bool
	// kernels: a GPU row names the kernel that ran it.
	kernels bool
}

var rowKinds = map[ops.Family]rowKind{
	ops.FamilyPut:       {table: pointTable},
	ops.FamilyGet:       {table: pointTable},
	ops.FamilyPutSignal: {table: pointTable},
	ops.FamilyPutFlag:   {table: pointTable},
	ops.FamilySignal:    {table: pointTable, roundTrip: true},
	ops.FamilyLatency:   {table: pointTable, roundTrip: true},
	ops.FamilyCollective: {everyRank: true, bus: true, kernels: true,
		table: func(res Result, op string, x extras, named bool) report.Table {
			return collectiveTable(res, op, x, named, false)
		}},
	ops.FamilyRouted: {everyRank: true, crossed: true,
		table: func(res Result, op string, x extras, named bool) report.Table {
			return collectiveTable(res, op, x, named, true)
		}},
	ops.FamilyMeeting: {everyRank: true, sizeless: true,
		table: func(res Result, op string, x extras, _ bool) report.Table { return meetTable(res, op, x) }},
	ops.FamilyFused:  {everyRank: true, table: fusedTable},
	ops.FamilyGetAdd: {table: pointTable},
}

// kindOf is how op's rows are derived and drawn.
func kindOf(op string) rowKind { return rowKinds[ops.Op(op).Family()] }

// Plotted says whether op's rows are points of a bandwidth against size: not a round
// trip's (a time), a MoE layer's (one size each, which a table says better than a lone
// point) or a meeting's.
func Plotted(op string) bool {
	k := kindOf(op)
	return ops.Op(op).Known() && !k.roundTrip && !k.crossed && !k.sizeless
}

// BusRated says whether op's rows are drawn by their bus bandwidth (as nccl-tests'
// collectives are) rather than by the bandwidth of one pair.
func BusRated(op string) bool { k := kindOf(op); return k.bus || k.crossed }
