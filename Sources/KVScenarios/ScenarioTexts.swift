import Foundation

/// The conversations the scenarios replay: realistic app text, written for this repository.
enum ScenarioTexts {
    static let coachInstructions = """
        You are the coach inside a running app. Give short, specific advice based on the runner's \
        recent sessions. Prefer easy running, sleep and consistency over heroics. When a pain gets \
        sharper during a run, tell the runner to stop and rest.
        """

    static let coachPrompts = [
        "I ran five kilometres this morning and my legs feel heavy. What should I do tomorrow?",
        "Can you plan my week? I have time on Monday, Wednesday, Friday and Sunday.",
        "What should I eat before a long run on Sunday morning?",
        "My watch says I slept badly three nights in a row. Should I still do the intervals?",
        "How fast should my easy runs be if my race pace is five minutes per kilometre?",
        "I missed the strength session again. Is that a problem?",
        "Summarise my week in three sentences.",
        "What is one thing I should change next month?",
    ]

    static let cookingInstructions = """
        You are a cooking assistant. Suggest simple recipes with the ingredients the user has, \
        ask about allergies when it matters, and keep every step short enough to read while cooking.
        """

    static let cookingPrompts = [
        "Suggest a recipe using two tomatoes, an onion, spinach, chickpeas and rice.",
        "I have no cumin. What can I use instead?",
        "How do I keep the rice from getting sticky?",
        "Make it suitable for a child who does not like spicy food.",
        "What can I do with the leftovers tomorrow?",
        "Write a shopping list for the same meal for six people.",
        "How long can I keep the curry in the fridge?",
        "Suggest a quick dessert with apples and oats.",
    ]

    static let editorInstructions = """
        You are the assistant in a presentation editor. Improve slides the user selects: shorter \
        titles, at most three bullet points, one message per slide. Never invent numbers.
        """

    static let editorPrompts = [
        "Improve slide two: the title is Our quarterly results in detail.",
        "Make the chart on slide four easier to read.",
        "Write speaker notes for the opening slide.",
        "Slides five and six repeat each other. Merge them.",
        "Suggest a closing slide that asks for the budget approval.",
        "Shorten every title in the deck.",
        "Check the deck for accessibility problems.",
        "Give me a one sentence summary of the whole talk.",
    ]

    static let travelInstructions = """
        You are a travel assistant in a mobile app. Use the tools when you need live data, keep \
        answers short, and list at most three options.
        """

    static let travelPrompts = [
        "Plan a weekend in Porto for two people.",
        "Where should we eat on Saturday evening?",
        "Is it better to take the train or drive from Lisbon?",
        "What should we pack if it might rain?",
        "Add the dinner reservation to my calendar.",
        "Find something to do on Sunday morning.",
        "How much will the whole weekend cost?",
        "Remind me what we booked so far.",
    ]

    static let summary = """
        Summary of the earlier conversation: the runner trains four times a week, is preparing \
        for a ten kilometre race, sleeps poorly before early sessions, and asked for easy weeks \
        after hard ones. Open question: whether to add a second long run.
        """

    /// A long, realistic answer used to fill history near the context limit.
    static let longAnswer = """
        Here is a detailed plan. On Monday run thirty minutes at an easy pace and keep your \
        breathing relaxed. On Wednesday do six short intervals of one minute with two minutes of \
        slow jogging between them. On Friday rest or walk. On Sunday run for seventy minutes, \
        starting slowly and finishing with energy left. Eat a meal with protein and carbohydrates \
        after each session, drink water through the day, and go to bed at the same time every night.
        """

    /// The coaching screen's instructions: every focus message shares them.
    static let focusInstructions = """
        You are the coach inside a running app. After each run the app detects form and pacing \
        errors and asks you for one focus message per error, shown as a card on the run summary \
        screen. Each message has two sentences: the first says what happened in plain words, \
        the second gives one drill or cue to try on the next run. Be specific and encouraging, \
        never blame, and never mention other errors than the one asked about. Use kilometres and \
        minutes. Do not give medical advice: when the runner reports pain, tell them to rest and \
        to see a professional. Keep each message under forty words. Example for the error \
        "slow start": You started three kilometres slower than your plan and made it up at the \
        end. Next time, set a pace alert for the first kilometre and run it at goal pace.
        """

    /// The focus instructions as the `t`-th screen opening renders them: the time, three minutes
    /// later each time, as their last sentence.
    static func focusInstructions(at t: Int) -> String {
        focusInstructions + " Current time: 18:\(String(format: "%02d", 3 * t % 60))."
    }

    /// One prompt per error type, then the summary of the session.
    static let focusPrompts = [
        "Error type: overstriding. Seen on 40 percent of steps in the second half.",
        "Error type: low cadence. Average 158 steps per minute on easy kilometres.",
        "Error type: heel striking. Seen mostly on the downhill sections.",
        "Error type: arm crossing. The left arm crosses the midline on most strides.",
        "Error type: pace drift. The last three kilometres were 25 seconds slower.",
        "Error type: long ground contact. Averaging 290 milliseconds per step.",
        "Error type: forward lean from the waist. Seen after the fifth kilometre.",
        "Error type: tense shoulders. Detected in the final sprint.",
        "Error type: uneven stride length. The right stride is 6 percent longer.",
        "Error type: skipped warm-up. The first kilometre started at race pace.",
        "Summarise the session in three sentences and name the one error to fix first.",
    ]

    /// What the user asks after reopening a long conversation.
    static let relaunchPrompts = [
        "Can you remind me which day we planned the museum?",
        "And is there a good bakery near the hotel?",
    ]

    static func prompt(_ prompts: [String], turn: Int) -> String {
        turn < prompts.count ? prompts[turn] : "\(prompts[turn % prompts.count]) (follow-up \(turn / prompts.count))"
    }
}
