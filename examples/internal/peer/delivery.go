package peer

// ExitDelivery: modelowner verify found a delivery that is not what was
// bought: a purchased candidate missing, out of order or not the one
// committed to, a record that should not be there, a bundle of another
// session, or candidates the audit of the scores flags. The report names
// each (examples/README.md, "The purchase").
const ExitDelivery = 6
