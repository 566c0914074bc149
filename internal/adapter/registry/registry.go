// Package registry lists the queue systems' drivers: the one place that
// names them all. Adding a system is a driver's package and its line
// here; the core finds it through Drivers and JobStores.
package registry

import (
	"github.com/expiryctl/expiryctl/config"
	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/adapter/broker"
	"github.com/expiryctl/expiryctl/internal/adapter/bullmq"
	"github.com/expiryctl/expiryctl/internal/adapter/driver"
	"github.com/expiryctl/expiryctl/internal/adapter/jobtable"
	"github.com/expiryctl/expiryctl/internal/adapter/pgboss"
	"github.com/expiryctl/expiryctl/internal/adapter/riverjobs"
	"github.com/expiryctl/expiryctl/internal/adapter/sqsqueue"
	"github.com/expiryctl/expiryctl/store"
)

// drivers are every system's, in the order help and views list them.
var drivers = []driver.Driver{
	broker.Driver,
	sqsqueue.Driver,
	riverjobs.Driver,
	bullmq.Driver,
	jobtable.Driver,
	pgboss.Driver,
}

// Drivers are every system's drivers.
func Drivers() []driver.Driver { return drivers }

// JobStores are the drivers of the systems whose failed jobs stay in
// their store.
func JobStores() []driver.JobStore {
	var out []driver.JobStore
	for _, d := range drivers {
		if s, ok := d.(driver.JobStore); ok {
			out = append(out, s)
		}
	}
	return out
}

// Brokers are the drivers of the systems whose dead letters are copies
// in a queue, and which the commands reach through the driver.Broker seam.
func Brokers() []driver.Broker {
	var out []driver.Broker
	for _, d := range drivers {
		if b, ok := d.(driver.Broker); ok {
			out = append(out, b)
		}
	}
	return out
}

// Of is the driver of system.
func Of(system deadletter.System) (driver.Driver, bool) {
	for _, d := range drivers {
		if d.Traits().System == system {
			return d, true
		}
	}
	return nil, false
}

// ConfigRules are what a connection of each system takes in the
// operator's configuration file.
func ConfigRules() []config.Rules {
	out := make([]config.Rules, len(drivers))
	for i, d := range drivers {
		out[i] = d.Config()
	}
	return out
}

// QueueSystems describe every driver's system to the archive, for the
// migrate to register (store.MigrateDeployment): the schema reads what
// differs between systems from them and names none, down to why a system
// shows nobody consuming a queue, which refuses a replay request that does
// not vouch for the handler (rule handler-unseen).
func QueueSystems() []store.QueueSystem {
	out := make([]store.QueueSystem, len(drivers))
	for i, d := range drivers {
		t := d.Traits()
		out[i] = store.QueueSystem{Name: string(t.System), QueuePrefix: t.QueuePrefix, RetriesInPlace: t.RetriesInPlace,
			NamesConnectionInQueue: t.NamesConnectionInQueue, DefaultConnection: t.DefaultConnection,
			ConsumersUnseen: d.Words().ConsumersUnseen}
	}
	return out
}

// Systems say how each system reads in the views.
func Systems() deadletter.Systems {
	out := make(deadletter.Systems, len(drivers))
	for i, d := range drivers {
		t := d.Traits()
		out[i] = deadletter.SystemInfo{System: t.System, Title: d.Words().Title, QueuePrefix: t.QueuePrefix, RetriesInPlace: t.RetriesInPlace,
			Routes: t.Routes, NamesConnectionInQueue: t.NamesConnectionInQueue, NoOrigin: d.Words().NoOrigin}
	}
	return out
}
