/// The subscription part of an upstream product.
public struct UpstreamSubscription: Sendable, Equatable {
    /// The renewal period.
    public let period: SubscriptionPeriod
    /// The subscription group, when the product belongs to one.
    public let groupID: String?
    /// The introductory offer, if any.
    public let introductoryOffer: UpstreamOffer?
    /// The discount offer, if any.
    public let discountOffer: UpstreamOffer?

    /// - Parameters:
    ///   - period: The renewal period.
    ///   - groupID: The subscription group, if any.
    ///   - introductoryOffer: The introductory offer, if any.
    ///   - discountOffer: The discount offer, if any.
    public init(period: SubscriptionPeriod, groupID: String? = nil, introductoryOffer: UpstreamOffer? = nil, discountOffer: UpstreamOffer? = nil) {
        self.period = period
        self.groupID = groupID
        self.introductoryOffer = introductoryOffer
        self.discountOffer = discountOffer
    }
}
