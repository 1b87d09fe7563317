# idiom: OrdinalEncoder on the string columns, a for-loop over max_depth scored with cross_val_score(scoring='balanced_accuracy'), class_weight='balanced' DecisionTreeClassifier, best depth refit; intended: valid
import pandas as pd
from sklearn.model_selection import cross_val_score
from sklearn.preprocessing import OrdinalEncoder
from sklearn.tree import DecisionTreeClassifier

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")

features = [c for c in train.columns if c not in ("id", "ui")]
text_cols = train[features].select_dtypes(exclude="number").columns.tolist()
encoder = OrdinalEncoder(handle_unknown="use_encoded_value", unknown_value=-1)
train_codes = encoder.fit_transform(train[text_cols])
test_codes = encoder.transform(test[text_cols])
for i, col in enumerate(text_cols):
    train[col] = train_codes[:, i]
    test[col] = test_codes[:, i]

X, y = train[features], train["ui"]
results = {}
for depth in range(2, 11):
    tree = DecisionTreeClassifier(max_depth=depth, min_samples_leaf=20, class_weight="balanced", random_state=0)
    results[depth] = cross_val_score(tree, X, y, cv=5, scoring="balanced_accuracy").mean()
    print(depth, round(results[depth], 4))
best = max(results, key=results.get)
print("best depth:", best)

tree = DecisionTreeClassifier(max_depth=best, min_samples_leaf=20, class_weight="balanced", random_state=0)
tree.fit(X, y)
pd.DataFrame({"id": test["id"], "ui": tree.predict(test[features])}).to_csv("submission.csv", index=False)
